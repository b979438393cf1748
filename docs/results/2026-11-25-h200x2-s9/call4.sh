#!/usr/bin/env bash
# Session 9, call 4: many small in one submit_all call, f07273d (parts of 128) against call 2's
# binary (521b69b's engine: made first, handed over in one go), alternating, six rounds.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
for i in 1 2 3 4 5 6; do
  for b in old new; do
    B=$st/bin/atomr; [[ $b == old ]] && B=$st/bin/atomr_old
    echo "=== many_${b}_$i: mpirun -np 2 atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000" >> $log
    timeout 60 "${mp[@]}" -np 2 $B bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 >> $log 2>&1
  done
done
grep -E "^===|many small" $log | cut -c1-330
