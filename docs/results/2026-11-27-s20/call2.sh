#!/usr/bin/env bash
# Session 20, call 2 (nvidia-h200-x2): is the slow mode raw NCCL's? a2a_graph_probe (raw NCCL,
# eager against a CUDA graph, each waited for) in several runs, and what atomr's graphs hold
# (ATOMR_LOG=debug prints each capture's nodes).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
nvidia-smi --query-gpu=name --format=csv,noheader >> $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4 5 6; do
  r probe_$i 90 "${mp[@]}" -np 2 $st/bin/a2a_graph_probe 2000
done
r debug_a2a 60 "${mp[@]}" -np 2 -x ATOMR_LOG=debug $st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 300 -w 50 --many 0 -z 1
grep -E "^rc=[1-9]" $log
grep -E "^=== |^rank|^ +8 +[0-9]+ |stages|CUDA graph of capture" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-220 | head -150
