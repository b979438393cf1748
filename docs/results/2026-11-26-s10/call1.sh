#!/usr/bin/env bash
# Session 10, call 1 (nvidia-h200-x2): where a peer copy's time goes. peer_copy_probe (raw copies
# with each thing the device actor adds, one at a time), then `atomr bench p2p` and `bench device`.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c1; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib
log=$out/call1.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r probe 240 $st/bin/peer_copy_probe
r p2p 120 $st/bin/atomr bench p2p
r device 60 $st/bin/atomr bench device
cat $log
