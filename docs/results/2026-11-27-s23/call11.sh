#!/usr/bin/env bash
# Session 23, call 11 (nvidia-h200-x2): where a packed batch's issue goes on the NCCL path. A
# throwaway build of many_small_probe (HEAD 64c726d plus timers around each step of
# nccl_backend::issue_packed and world_engine::issue_batch, printed per process at exit; not
# committed), 2 ranks, NCCL and host, twice each.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c11; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
for i in 1 2; do
  echo "=== gpu_$i" >> $out/c11.log; timeout 60 "${mp[@]}" -np 2 $st/bin/msp_instr 300 1000 2048 --gpu >> $out/c11.log 2>&1
  echo "=== host_$i" >> $out/c11.log; timeout 60 "${mp[@]}" -np 2 $st/bin/msp_instr 300 1000 2048 >> $out/c11.log 2>&1
done
cat $out/c11.log
