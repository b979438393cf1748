#!/usr/bin/env bash
# Session 37, call 8 (nvidia-h200-x2, the lease of call 7), build d179698: the GPU tests whole
# (launch/gpu-suite, tests only) at the last code, after call 5's one failure (the WorldTeardown
# test's memory measured while a peer was still destroying its worlds, fixed in the test).
CALL=c8
source launch/gpu-call-env
suite 400
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
grep -E "gpu_.*test|failure_|bind" $out/suite.txt | cut -c1-60
