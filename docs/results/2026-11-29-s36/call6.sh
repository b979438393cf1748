#!/usr/bin/env bash
# Session 36, call 6 (nvidia-h200-x2: two H200s, lent for the first time since the thirty-first
# session), build 3f318b9 (the session's last code: kept calls, world::all_reduce_group, the timer
# thread stopped first at shutdown), with 1aab9ab's many_small_probe and atomr staged as *.v0, and
# nccl-tests 2.19.6 (MPI=1, sm_90) carried in .gpu-nt: the two-rank row first (1000 x 2 KiB
# all_reduces in one call, 2 ranks x 1 GPU), then the GPU tests with what time is left.
CALL=c6 CALL_BUDGET_S=200
source launch/gpu-call-env
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
b=$st/bin; mkdir -p $out/json
nvidia-smi topo -m >> $out/machine.txt 2>&1
for i in 1 2 3; do
  r many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
  r many.off_$i 40 "${mp[@]}" -x ATOMR_COLL_GROUP_CACHE=0 -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many.off_$i.json
  [[ $i == 3 ]] || r many.v0_$i 40 "${mp[@]}" -np 2 $b/atomr.v0 bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many.v0_$i.json
done
r nt_group_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r nt_seq_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -n 1000 -w 20
for i in 1 2; do
  r group_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --group
  r buffers_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --buffers
  r prepared_$i 20 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group.v0_$i 20 "${mp[@]}" -np 2 $b/many_small_probe.v0 300 1000 2048 --gpu --group
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "rows done ${SECONDS}s" >> $log
[[ ${SUITE:-1} == 1 ]] && suite $(( 560 - SECONDS ))
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt 2>/dev/null; tail -2 $out/suite.txt 2>/dev/null
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small|^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-560; tail -2 $log
