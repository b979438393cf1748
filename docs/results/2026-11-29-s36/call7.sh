#!/usr/bin/env bash
# Session 36, call 7 (nvidia-h200-x2: two H200s, the same lease as call 6), build 3f318b9: two more
# runs of the 1000 x 2 KiB row at 2 ranks, then the small rows (8 B to 1 MiB, raw NCCL and atomr in
# the same run) for every collective back to back, and all_reduce with each op waited for (-z 1).
CALL=c7 CALL_BUDGET_S=240
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 4 5; do
  r many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
r small_all_reduce_z1 60 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1 -J $out/json/small_all_reduce_z1.json
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r small_$op 60 "${mp[@]}" -np 2 $b/atomr bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -J $out/json/small_$op.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
