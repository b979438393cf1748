#!/usr/bin/env bash
# Session 8, call 9: many small, each its own call (3f89638 and new) and in one submit_all call (new).
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c9.log
for i in 1 2; do
  for b in 3f89638 new; do
    A=$s1/bin/atomr; [[ $b == 3f89638 ]] && A=$s1/bin/atomr_3f89638
    echo "=== many_${b}_$i: mpirun -np 2 atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000" >> $log
    timeout 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 >> $log 2>&1
  done
done
grep -E "^===|many small" $log
