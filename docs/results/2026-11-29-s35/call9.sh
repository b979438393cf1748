#!/usr/bin/env bash
# Session 35, call 9 (nvidia-h200: one H200; the two-GPU machine not lent), build 1aab9ab (the
# session's last code: call 6's engine, with a prepared call's kept keys bounded at 64 per bulk
# call): the GPU tests; 1000 x 2 KiB at 1 rank (prepared, submit_group) and bench coll --many 1000.
CALL=c9 CALL_BUDGET_S=300
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
suite 265
for i in 1 2; do
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
