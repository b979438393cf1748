#!/usr/bin/env bash
# Session 32, call 6 (nvidia-h200: one H200), the session's last code (7b85c34: the pack vote
# starter shared by planned batches and bulk calls, the per-thread pointer sets shared by
# submit_call and submit_bulk): the GPU tests (launch/gpu-suite), then many_small_probe --gpu at 1
# rank, --prepared and --group taking turns.
CALL=c6 CALL_BUDGET_S=330
source launch/gpu-call-env
b=$st/bin
suite 330
for i in 1 2; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
