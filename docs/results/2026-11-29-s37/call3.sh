#!/usr/bin/env bash
# Session 37, call 3 (nvidia-h200-x2, the lease of call 2), build 7ae6171: the GPU tests
# (launch/gpu-suite, tests only), with the split world test programs (gpu_world_test,
# gpu_world_calls_test) timed at 2 ranks x 1 GPU and at 1 rank.
CALL=c3
source launch/gpu-call-env
suite 560
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "gpu_.*test" $out/suite.txt | cut -c1-120
