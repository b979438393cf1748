#!/usr/bin/env bash
# Session 33, call 5 (nvidia-h200: one H200): gpu_world_test, the only program 3d481a3 changed
# (its packed and prepared graph tests share their rounds' helpers), at 1 rank and at 2 ranks
# over NCCL's socket transport (launch/own-nccl-host), as launch/gpu-suite runs it.
CALL=c5 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin
r world_np1 120 "${mp[@]}" -np 1 $b/gpu_world_test
r world_np2_own_hosts 150 mpirun --bind-to none -x LD_LIBRARY_PATH -x GTEST_COLOR -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1 -np 2 launch/own-nccl-host $b/gpu_world_test
echo "total ${SECONDS}s" >> $log
grep -E "^=== |^rc=|PASSED|FAILED|WorldGraphs.*(OK|SKIPPED)" $log | cut -c1-200
