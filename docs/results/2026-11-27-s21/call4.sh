#!/usr/bin/env bash
# Session 21, call 4 (nvidia-h200-x2): the plan exchange by host_allreduce (point-to-point)
# instead of MPI_Iallreduce. Three engines taking turns, three rounds: new (chains + the
# exchange), chain (68f7969, chains only), old (32aa141). all_reduce back to back and -z 1; the
# other collectives back to back and -z 1, new against old. gpu_world_test at 2 ranks.
set -uo pipefail
root=$PWD; st=${ST:-$root/.gpu-stage}; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r world_np2 240 "${mp[@]}" -np 2 $st/bin/gpu_world_test
for i in 1 2 3; do
  for z in 0 1; do
    for e in new chain old; do
      r ${e}_all_reduce_z${z}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _$e) bench coll all_reduce -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
    done
  done
done
for i in 1 2; do
  for z in 0 1; do
    for k in all_gather reduce_scatter broadcast all_to_all; do
      for e in new old; do
        r ${e}_${k}_z${z}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _$e) bench coll $k -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
      done
    done
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^\[  (PASSED|FAILED) |tests ran" $log
grep -E "# engine" $log | head -6
