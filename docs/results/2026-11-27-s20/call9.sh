#!/usr/bin/env bash
# Session 20, call 9 (nvidia-h200-x2): (1) a2a_graph_probe with buffers from a memory pool like
# atomr's (does raw NCCL's graphed all_to_all show the slow mode then?); (2) all_to_all 8 B-1 MiB,
# back to back and -z 1, with CUDA graphs (default) and without (ATOMR_NCCL_GRAPHS=0), runs
# taking turns.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c9.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  r probe_pool_$i 90 "${mp[@]}" -np 2 $st/bin/a2a_graph_probe 2000 pool
done
for i in 1 2 3; do
  for z in 0 1; do
    for g in 1 0; do
      r a2a_g${g}_z${z}_$i 90 "${mp[@]}" -np 2 -x ATOMR_NCCL_GRAPHS=$g $st/bin/atomr bench coll all_to_all -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
    done
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^=== |^rank .*all_to_all (graph|eager)|buffers" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
