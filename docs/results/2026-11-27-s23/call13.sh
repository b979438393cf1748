#!/usr/bin/env bash
# Session 23, call 13 (nvidia-h200-x2), the same lease as call 12: old (f851b86) and HEAD
# (3b7eaee's build) taking turns on 1000 x 2 KiB in one submit_all call, NCCL and host.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c13; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c13.log
r() { local name=$1; shift; echo "=== $name" >> $log; timeout 60 "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for v in old head; do
    r ${v}_probe_gpu_$i "${mp[@]}" -np 2 $st/bin/msp_$v 300 1000 2048 --gpu
    r ${v}_probe_host_$i "${mp[@]}" -np 2 $st/bin/msp_$v 300 1000 2048
  done
done
for v in old head; do
  r ${v}_many_gpu "${mp[@]}" -np 2 $st/bin/atomr_$v bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
grep -E "^===|many_small_probe:|many small" $log | paste - - | sed -E 's/=== ([a-z_0-9]+).*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/' | sed -E 's/^=== ([a-z_]+).*in one submit_all call ([0-9.]+) us: ([0-9.]+x).*/\1 one call \2 \3/' | sort
