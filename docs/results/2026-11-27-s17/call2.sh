#!/usr/bin/env bash
# Session 17, call 2 (nvidia-h200-x2): CUDA graphs at 1 rank x 2 GPUs (one capture per member's
# stream) and the latency-window fix. gpu_world_test at 1 rank (the new two-GPU graph test, with
# the graphs' node counts in the debug log) and at 2 ranks, the failure tests, the probe again
# (now printing node types), then all_reduce and broadcast at 1 rank x 2 GPUs and 2 ranks.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/${CALL:-c2}; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR)
A=$st/bin/atomr
log=$out/${CALL:-c2}.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
r members1 60 "${mp[@]}" -x ATOMR_LOG=debug -np 1 $st/bin/gpu_world_test --gtest_filter='WorldMembers.*'
r world1 90 "${mp[@]}" -np 1 $st/bin/gpu_world_test
r world2 120 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r failures2 60 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
r probe 120 "${mp[@]}" -np 1 $st/bin/multi_gpu_graph_probe 2000
for op in all_reduce broadcast all_gather; do
  for z in 0 1; do
    r g2_${op}_z$z 60 "${mp[@]}" -np 1 $A bench coll $op -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  done
done
for z in 0 1; do
  r g2_off_z$z 60 "${mp[@]}" -x ATOMR_NCCL_GRAPHS=0 -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  r small_all_reduce_z$z 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
done
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]|FAILED|PASSED|^=== " $log | grep -v "^=== " ; python3 $root/.gpu-tools/ab_table.py $log
grep -E "^(eager|per_device|fork_join)|probe:|^# (per_device|fork_join)" $log
grep -E "CUDA graph of capture" $log | head -12
