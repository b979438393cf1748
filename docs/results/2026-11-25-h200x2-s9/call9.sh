#!/usr/bin/env bash
# Session 9, call 9: the GPU tests at 52d6552 (ATOMR_SUITE_PART=tests launch/gpu-suite).
set -uo pipefail
out=$OUT/c9; mkdir -p "$out"
nvidia-smi --query-gpu=index,name --format=csv > "$out/gpus.txt" 2>&1
ATOMR_SUITE_PART=tests timeout 240 launch/gpu-suite > "$out/suite.out" 2>&1
echo "suite rc=$?"
cp $OUT/summary.txt $out/suite_summary.txt 2>/dev/null
cat "$out/gpus.txt"; grep -E "rc=[1-9]|failures:|skipped|gpu_world" "$OUT/summary.txt" | head -20
