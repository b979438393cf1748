#!/usr/bin/env bash
# Session 36, call 5 (nvidia-h200: one H200): prepared calls of 1000 x 2 KiB at 1 rank, six rounds
# taking turns: 1aab9ab's probe (*.v0), 7879aff's (call 3's build), and 7879aff without the kept
# calls' expiry check in the progress loop (*.noexp, for this comparison only): is the expiry
# check what made call 4's prepared calls slower?
CALL=c5 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3 4 5 6; do
  r prepared.v0_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.v0 300 1000 2048 --gpu --prepared
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r prepared.noexp_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.noexp 300 1000 2048 --gpu --prepared
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000" $log | sed 's/mpirun.*-np [12] //' | cut -c1-200; tail -1 $log
