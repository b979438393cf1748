#!/usr/bin/env bash
# Session 36, call 4 (nvidia-h200: one H200), the build of call 3 (7879aff) and 1aab9ab's probe
# (*.v0): prepared calls of 1000 x 2 KiB at 1 rank, eight rounds taking turns (calls 1 and 3 had
# the new build's prepared calls slower in 6 of 7 pairs, the bench's the other way round).
CALL=c4 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3 4 5 6 7 8; do
  r prepared.v0_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.v0 300 1000 2048 --gpu --prepared
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000" $log | sed 's/mpirun.*-np [12] //' | cut -c1-200; tail -1 $log
