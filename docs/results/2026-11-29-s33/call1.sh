#!/usr/bin/env bash
# Session 33, call 1 (nvidia-h200-x2: two H200s, 2 ranks): issue 12's last row, 1000 x 2 KiB
# all_reduces in one call, with bulk calls (ATOMR_COLL_BULK=1, the default) and without, taking
# turns: bench coll --many 1000 (its submit_group and prepared columns), many_small_probe --gpu
# with --group and --prepared; nccl-tests' one NCCL group of 1000 beside them. Then the GPU tests.
CALL=c1 CALL_BUDGET_S=300
source launch/gpu-call-env
tar xJf "$root/.gpu-nt/nt.tar.xz" -C /tmp
nt=/tmp/ntst b=$st/bin
mkdir -p $out/json
r nt_m1000_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do
  r many_b1_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b1_$i.json
  r many_b0_$i 40 "${mp[@]}" -x ATOMR_COLL_BULK=0 -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b0_$i.json
  r prepared_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --group
  r group_b0_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=0 -np 2 $b/many_small_probe 300 1000 2048 --gpu --group
done
r nt_m1000_2 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
suite 280
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
