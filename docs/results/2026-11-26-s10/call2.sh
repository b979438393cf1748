#!/usr/bin/env bash
# Session 10, call 2 (nvidia-h200-x2): peer_copy_probe again, with pools without shareable handles,
# cudaMemcpyAsync and a copy kernel beside cudaMemcpyPeerAsync.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c2; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib
log=$out/call2.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r probe 240 $st/bin/peer_copy_probe
cat $log
