#!/usr/bin/env bash
# Session 21, call 5 (nvidia-h200-x2): the plan exchange posted early (before the plan under way
# runs out). Four engines taking turns, three rounds, all_reduce back to back and -z 1: new
# (chains, exchange by host_allreduce, posted early), hx (without the early post), chain
# (68f7969), old (32aa141). broadcast and all_to_all -z 1, new against old (call 4 had them
# over raw more often with the new engine). gpu_world_test at 2 ranks.
set -uo pipefail
root=$PWD; st=${ST:-$root/.gpu-stage}; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r world_np2 240 "${mp[@]}" -np 2 $st/bin/gpu_world_test
for i in 1 2 3; do
  for z in 0 1; do
    for e in new hx chain old; do
      r ${e}_all_reduce_z${z}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _$e) bench coll all_reduce -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
    done
  done
  for k in broadcast all_to_all; do
    for e in new old; do
      r ${e}_${k}_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _$e) bench coll $k -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z 1
    done
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^\[  (PASSED|FAILED) |tests ran" $log
grep -E "^=== (new|hx)_all_reduce_z0|# engine" $log | head -8 | cut -c1-200
