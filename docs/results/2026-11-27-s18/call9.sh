#!/usr/bin/env bash
# Session 18, call 9 (nvidia-h200-x2, 44a8ddd): the GPU tests of the collectives engine on the
# final commit: gpu_world_test at 2 ranks and at 1 rank x 2 GPUs, gpu_world_failure_test at 2
# ranks, gpu_buffers_test at 2 ranks.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c9.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
r gpu_world_np2 90 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r gpu_world_np1 90 "${mp[@]}" -np 1 $st/bin/gpu_world_test
r gpu_world_failure_np2 90 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
r gpu_buffers_np2 90 "${mp[@]}" -np 2 $st/bin/gpu_buffers_test
grep -E "^=== |^rc=|PASSED|FAILED|tests ran" $log | sed -E 's/mpirun .* -np/-np/'
