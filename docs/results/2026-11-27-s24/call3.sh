#!/usr/bin/env bash
# Session 24, call 3 (nvidia-h200-x2), at 052b85e: what a waited-for peer copy costs in raw CUDA
# with each thing the device actor adds (peer_copy_probe), beside bench p2p and bench device.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c3; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r peer_copy_probe 120 $st/bin/peer_copy_probe 4096 65536
r p2p_1 60 $st/bin/atomr bench p2p --max-bytes 1M
r device 60 $st/bin/atomr bench device
r p2p_2 60 $st/bin/atomr bench p2p --max-bytes 1M
