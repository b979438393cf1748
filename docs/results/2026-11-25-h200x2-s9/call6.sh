#!/usr/bin/env bash
# Session 9, call 6: a CPU profile (tests/probes/pc_sampler.c) of the many-small mode at cd54954:
# 20000 x 2 KiB all_reduces per run, each its own call and in one submit_all call.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out/prof"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
timeout 120 mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x LD_PRELOAD=$st/lib/libpc_sampler.so \
  -x PC_SAMPLER_OUT=$out/prof/s -x PC_SAMPLER_US=50 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 10 -w 2 \
  --many 20000 2>&1 | grep -E "many small|rror"
ls -la $out/prof | head; (cd $out && tar czf prof.tar.gz prof && rm -rf prof)
