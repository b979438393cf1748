#!/usr/bin/env bash
# Session 37, call 9 (nvidia-h200-x2, a short lease), build 5bcf653 (the last code: the debug
# lines' laps through one lap_timer): the two world test programs at 2 ranks x 1 GPU, one with
# ATOMR_LOG=debug for the creation and teardown lines.
CALL=c9 CALL_BUDGET_S=100
source launch/gpu-call-env
b=$st/bin
r gpu_world_test.np2 60 "${mp[@]}" -np 2 -x ATOMR_LOG=debug $b/gpu_world_test
r gpu_world_calls_test.np2 60 "${mp[@]}" -np 2 $b/gpu_world_calls_test
echo "total ${SECONDS}s" >> $log
grep -E "^=== |^rc=|FAILED|PASSED|six worlds" $log | sed 's/mpirun.*-np [12] //' | cut -c1-200
grep -m2 "NCCL backend up\|NCCL backend down" $log | cut -c1-200; grep -c "NCCL backend down" $log
