#!/usr/bin/env bash
# Session 16, call 8 (nvidia-h200-x2, 21fb367: votes take the latency window alike on every rank):
# the world tests at 2 and 1 ranks, the failure tests, the vote test over the host backend, then
# all_reduce and broadcast 8 B-1 MiB back to back and waited for.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR)
A=$st/bin/atomr
log=$out/c8.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
r world2 120 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r world1 60 "${mp[@]}" -np 1 $st/bin/gpu_world_test --gtest_filter='WorldGraphs.*:Collectives.AllReduceF32:Collectives.AllToAll:Collectives.RequestsSubmittedTogether*'
r failures2 60 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
r votes2 60 "${mp[@]}" -np 2 $st/bin/world_graph_votes_test
for op in all_reduce broadcast; do
  for z in 0 1; do
    r small_${op}_z$z 40 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  done
done
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]|FAILED|PASSED" $log; python3 $root/.gpu-tools/ab_table.py $log
