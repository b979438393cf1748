#!/usr/bin/env bash
# Session 32, call 5 (nvidia-h200: one H200; the two-GPU machine not lent), prepared calls
# (world::prepare_group / submit_prepared) at 1 rank: many_small_probe --gpu, the call prepared
# once (--prepared), in one submit_group call (--group) and without bulk calls, taking turns, back
# to back and with --gap; bench coll --many 1000 (its new prepared column); then the GPU tests.
CALL=c5 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r group_b0_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=0 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
r gap_prepared 20 "${mp[@]}" -np 1 $b/many_small_probe 200 1000 2048 --gpu --prepared --gap
r gap_group 20 "${mp[@]}" -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
for i in 1 2; do
  r many_$i 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
suite 330
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
