#!/usr/bin/env bash
# Session 31, call 1d (nvidia-h200, one GPU: the two-GPU machine was not lent), 63a0141: the GPU tests,
# launch/gpu-suite (gpu_world_test at 2 ranks goes over NCCL's network transport, each rank its
# own host: launch/own-nccl-host).
CALL=c1d
source launch/gpu-call-env
t0=$SECONDS
timeout 330 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -3 $out/suite.txt
