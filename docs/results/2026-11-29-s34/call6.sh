#!/usr/bin/env bash
# Session 34, call 6 (nvidia-h200: one H200; the two-GPU machine not lent), build ac4c15d (the
# session's last code: call 4's, and a bulk call's first batch not looked at again when it was
# found ready with nothing to wait for): the GPU tests; 1000 x 2 KiB at 1 rank taking turns.
CALL=c6 CALL_BUDGET_S=270
source launch/gpu-call-env
b=$st/bin
suite 265
for i in 1 2; do
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
