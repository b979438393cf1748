#!/usr/bin/env bash
# Session 37, call 4 (nvidia-h200: one H200), build 7fbb762 (communicators retired at a world's
# end; 1200 back-to-back sums on GPUs): the GPU tests (launch/gpu-suite, tests only), with the
# world test programs timed at 1 rank and at 2 ranks over sockets, against call 1's.
CALL=c4
source launch/gpu-call-env
suite 400
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "gpu_.*test|failure_" $out/suite.txt | cut -c1-60
