#!/usr/bin/env bash
# Session 23, call 5 (nvidia-h200-x2): 1000 x 2 KiB in one submit_all call with the new engine,
# waiting callers assisting (ATOMR_WAIT_ASSIST=1, auto there) or not (0), taking turns;
# many_small_probe, NCCL and host backend.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for a in 1 0; do
    r gpu_assist${a}_$i 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=$a -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
    r host_assist${a}_$i 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=$a -np 2 $st/bin/many_small_probe 300 1000 2048
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:" $log | paste - - | sed -E 's/=== ([a-z_0-9]+):.*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/' | sort
