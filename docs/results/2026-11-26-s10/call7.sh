#!/usr/bin/env bash
# Session 10, call 7 (nvidia-h200-x2): the GPU tests at fe60823 (ATOMR_SUITE_PART=tests
# launch/gpu-suite), then `atomr bench p2p` three times and `bench device`.
set -uo pipefail
out=$OUT/c7; mkdir -p "$out"
nvidia-smi -L > "$out/gpus.txt" 2>&1
export NCCL_NVLS_ENABLE=0
ATOMR_SUITE_PART=tests timeout 420 launch/gpu-suite > "$out/suite.out" 2>&1
echo "suite rc=$?"
cp $OUT/summary.txt $out/suite_summary.txt 2>/dev/null
export LD_LIBRARY_PATH=$PWD/.gpu-stage/lib
for i in 1 2 3; do echo "=== p2p_$i"; timeout 120 .gpu-stage/bin/atomr bench p2p; done > "$out/p2p.log" 2>&1
echo "=== device" >> "$out/p2p.log"; timeout 60 .gpu-stage/bin/atomr bench device >> "$out/p2p.log" 2>&1
cat "$out/gpus.txt"; grep -E "rc=[1-9]|failures:|skipped|gpu_world" "$out/suite_summary.txt" | head -20; tail -3 "$out/suite.out"
grep -E "^===|^[0-9]+ +[0-9]+ |hops" "$out/p2p.log"
