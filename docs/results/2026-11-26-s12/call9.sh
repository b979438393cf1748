#!/usr/bin/env bash
# Session 12, call 9 (nvidia-h200-x2): the final code (atomr_fix, 1ba...: see COMMIT): gpu_world_test
# at 2 ranks and 1 rank x 2 GPUs and gpu_world_failure_test, then the small rows of every
# collective, back to back and each waited for.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c9.log
{ echo "commit: $(cat $st/ab/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local t0=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-t0)) s)" >> $log; }
r gpu_world_test_np2 120 "${mp[@]}" -np 2 $st/ab/gpu_world_test
r gpu_world_test_np1 120 "${mp[@]}" -np 1 $st/ab/gpu_world_test
r gpu_world_failure_test_np2 120 "${mp[@]}" -np 2 $st/ab/gpu_world_failure_test
A=$st/ab/atomr_fix
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  done
done
grep -E "^===|^rc=|PASSED|FAILED" $log | grep -B1 -A2 "gpu_world" | grep -v "^--"
python3 $root/.gpu-tools/ab_table.py $log
