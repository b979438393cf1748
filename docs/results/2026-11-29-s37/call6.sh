#!/usr/bin/env bash
# Session 37, call 6 (nvidia-h200: one H200), build e70cb08 (the retirer's threads joined at exit
# without its lock): the exit with communicators still being destroyed, 8 program runs whose last
# world goes right before exit; then gpu_world_test at 1 rank and at 2 ranks over sockets.
CALL=c6 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin
own=(mpirun --bind-to none -x LD_LIBRARY_PATH -x GTEST_COLOR -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1)
for i in 1 2 3 4; do
  r exit_np1_$i 30 "${mp[@]}" -np 1 -x ATOMR_LOG=debug $b/gpu_world_test --gtest_filter='Collectives.AllReduceF32:Collectives.AllToAll'
  r exit_np2_$i 60 "${own[@]}" -np 2 launch/own-nccl-host $b/gpu_world_test --gtest_filter='Collectives.AllReduceF32'
done
r gpu_world_test.np1 120 "${mp[@]}" -np 1 $b/gpu_world_test
r gpu_world_test.np2_own_hosts 150 "${own[@]}" -np 2 launch/own-nccl-host $b/gpu_world_test
echo "total ${SECONDS}s" >> $log
grep -E "^=== |^rc=|FAILED|six worlds" $log | sed 's/mpirun.*-np [12] //' | cut -c1-160
