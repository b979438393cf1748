#!/usr/bin/env bash
# Session 37, call 2 (nvidia-h200: one H200), build 62dfd3d (d082208's code plus a debug line with
# where an NCCL backend's teardown goes): why does almost every gpu_world_test test take ~520 ms at
# 1 rank when the world comes up in ~45 ms? A few tests with ATOMR_LOG=debug, with NCCL's own
# init/proxy logs, and with NCCL_CUMEM_ENABLE=0 (no UDS service thread) for comparison.
CALL=c2 CALL_BUDGET_S=120
source launch/gpu-call-env
b=$st/bin
f='Collectives.AllReduceF32:Collectives.AllToAll:Collectives.SendRecvAroundARing'
r debug 60 "${mp[@]}" -np 1 -x ATOMR_LOG=debug $b/gpu_world_test --gtest_filter=$f
r nccl_info 60 "${mp[@]}" -np 1 -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,PROXY,ALLOC $b/gpu_world_test --gtest_filter=$f
r cumem_off 60 "${mp[@]}" -np 1 -x NCCL_CUMEM_ENABLE=0 -x ATOMR_LOG=debug $b/gpu_world_test --gtest_filter=$f
command -v strace >> $log 2>&1 || echo "no strace" >> $log
echo "total ${SECONDS}s" >> $log
grep -E "^=== |OK \]|backend down|backend up|world of" $log | cut -c1-250
