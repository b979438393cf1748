#!/usr/bin/env bash
# Session 16, call 7 (nvidia-h200-x2, 2519bd9): 1000 concurrent 2 KiB all_reduces with graphs on
# and off (ATOMR_NCCL_GRAPHS=0), taking turns, to see whether the votes cost the submit_all call.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
for i in 1 2 3; do
  for g in 1 0; do
    echo "=== many_graphs${g}_$i" >> $log
    timeout 60 "${mp[@]}" -x ATOMR_NCCL_GRAPHS=$g -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 >> $log 2>&1
    echo "rc=$?" >> $log
  done
done
grep -E "^===|many small" $log
