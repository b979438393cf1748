#!/usr/bin/env bash
# Session 23, call 9 (nvidia-h200-x2): bench p2p as it was (HEAD e856cee's binary: raw then atomr,
# latency right after each side's bandwidth run) and a build (not kept) with the latency in 4 rounds taking
# turns, each after 20 untimed waited copies; taking turns, three runs each, 4 KiB-64 MiB.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c9; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib
log=$out/c9.log
for i in 1 2 3; do
  for v in head p2p; do
    echo "=== ${v}_$i" >> $log; timeout 60 $st/bin/atomr_$v bench p2p --max-bytes 64M >> $log 2>&1; echo "rc=$?" >> $log
  done
done
grep -E "^===|^[0-9]+ " $log
