#!/usr/bin/env bash
# Session 37, call 3 (nvidia-h200: one H200), build with the NCCL communicators of a gone world
# destroyed on a thread of their own (src/cluster/nccl_retire.cpp): gpu_world_test and
# gpu_world_calls_test at 1 rank and at 2 ranks over NCCL's socket transport (launch/own-nccl-host),
# timed and against call 1's 21/54 s and 24/30 s; the new WorldTeardown test's memory line; the
# debug lines of a few tests.
CALL=c3 CALL_BUDGET_S=300
source launch/gpu-call-env
b=$st/bin
own=(mpirun --bind-to none -x LD_LIBRARY_PATH -x GTEST_COLOR -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1)
r debug 60 "${mp[@]}" -np 1 -x ATOMR_LOG=debug $b/gpu_world_test --gtest_filter='Collectives.AllReduceF32:Collectives.AllToAll:Collectives.SendRecvAroundARing:WorldTeardown.*'
for p in gpu_world_test gpu_world_calls_test; do
  r $p.np1 120 "${mp[@]}" -np 1 $b/$p
  r $p.np2_own_hosts 150 "${own[@]}" -np 2 launch/own-nccl-host $b/$p
done
echo "total ${SECONDS}s" >> $log
grep -E "^=== |^rc=|OK \] WorldTeardown|FAILED|six worlds|backend down" $log | sed 's/mpirun.*-np [12] //' | cut -c1-250
