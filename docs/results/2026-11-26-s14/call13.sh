#!/usr/bin/env bash
# Session 14, call 13 (88b9bb9, staged by launch/stage-gpu): the GPU suite's tests on the final code.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c13; mkdir -p "$out"
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
tail -3 $out/suite.txt
