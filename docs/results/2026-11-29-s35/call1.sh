#!/usr/bin/env bash
# Session 35, call 1 (nvidia-h200-x2: two H200s), build 1aab9ab (this session's last code): the
# issue's row, 1000 x 2 KiB at two ranks. bench coll --many 1000 with bulk
# calls on and off (ATOMR_COLL_BULK=1/0) taking turns; many_small_probe --group and --prepared at
# 2 ranks (agreements per call); nccl-tests' one NCCL group of 1000 beside them; then the GPU tests
# (SUITE=0: not).
CALL=c1 CALL_BUDGET_S=260
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
tar xJf .gpu-nt/nt.tar.xz -C /tmp
for i in 1 2 3; do
  for k in 1 0; do
    r many_bulk${k}_$i 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_bulk${k}_$i.json
  done
  r group_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --group
  r prepared_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --prepared
done
r nt_group 40 "${mp[@]}" -np 2 /tmp/ntst/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r nt_seq 40 "${mp[@]}" -np 2 /tmp/ntst/all_reduce_perf -b 2K -e 2K -n 1000 -w 20
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
[[ ${SUITE:-1} == 1 ]] && suite 280
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|concurrent|prepared|submit_group|^ +2048" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
