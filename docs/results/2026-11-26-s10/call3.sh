#!/usr/bin/env bash
# Session 10, call 3 (nvidia-h200-x2): `atomr bench p2p` with peer copies by cudaMemcpyAsync
# (three runs), `bench device`, and the test programs that make peer copies.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c3; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
log=$out/call3.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi -L; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do r p2p_$i 120 $st/bin/atomr bench p2p; done
r device 60 $st/bin/atomr bench device
r buffers_two_gpus 120 $st/bin/gpu_buffers_two_gpus_test
r device_test 300 $st/bin/gpu_device_test
grep -vE "^\[ +(RUN|OK) +\]" $log | tail -80
