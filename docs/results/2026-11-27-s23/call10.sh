#!/usr/bin/env bash
# Session 23, call 10 (nvidia-h200-x2): where a waited-for 4 KiB peer copy's time goes: atomr
# bench p2p at 4 KiB only, 20 runs under the sampling profiler (pc_sampler), HEAD's binary.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c10; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib
for i in $(seq 1 20); do
  LD_PRELOAD=$st/lib/libpc_sampler.so PC_SAMPLER_OUT=$out/prof $st/bin/atomr_head bench p2p --min-bytes 4K --max-bytes 4K >> $out/c10.log 2>&1
done
python3 $root/launch/pc-profile-report --threads --top 30 --raw-out $out/prof.raw $out/prof.*.txt > $out/report.txt 2>&1; rm -f $out/prof.*.txt
grep -E "^4096" $out/c10.log | head -5
