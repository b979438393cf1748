#!/usr/bin/env bash
# Session 20, call 15 (nvidia-h200-x2), commit d409234: back to back, does keeping off the GPU
# interrupt CPUs cost anything? all_to_all and all_reduce 8 B-1 MiB with ATOMR_AVOID_IRQ_CPUS=1
# (default) and =0, taking turns.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c15; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c15.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for k in all_to_all all_reduce; do
    for a in 1 0; do
      r ${k}_avoid${a}_$i 40 "${mp[@]}" -np 2 -x ATOMR_AVOID_IRQ_CPUS=$a $st/bin/atomr bench coll $k -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z 0
    done
  done
done
grep -E "^rc=[1-9]" $log
