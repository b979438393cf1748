#!/usr/bin/env bash
# Session 21, call 2 (nvidia-h200-x2): chains (runs of queued requests replayed as one CUDA graph
# of 8) on the GPUs. The graph tests of gpu_world_test at 2 ranks and 1 rank; then every small
# collective row, back to back and -z 1, the new engine and the old one (32aa141, atomr_old)
# taking turns, two rounds.
set -uo pipefail
root=$PWD; st=${ST:-$root/.gpu-stage}; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
for irq in $(grep -i nvidia /proc/interrupts | awk -F: '{print $1}'); do
  echo "irq $irq effective $(cat /proc/irq/$irq/effective_affinity_list)" >> $out/machine.txt
done
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r graphs_np2 120 "${mp[@]}" -np 2 $st/bin/gpu_world_test --gtest_filter='WorldGraphs.*'
r graphs_np1 120 "${mp[@]}" -np 1 $st/bin/gpu_world_test --gtest_filter='WorldGraphs.*'
for i in 1 2; do
  for z in 0 1; do
    for k in all_reduce all_gather reduce_scatter broadcast all_to_all; do
      for e in new old; do
        bin=$st/bin/atomr; [[ $e == old ]] && bin=$st/bin/atomr_old
        r ${e}_${k}_z${z}_$i 60 "${mp[@]}" -np 2 $bin bench coll $k -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
      done
    done
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^\[  (PASSED|FAILED) |tests ran" $log
grep -E "^=== new_all_reduce_z0_1|^=== old_all_reduce_z0_1" -A12 $log | grep -E "^===|^ +[0-9]+ +[0-9]+ |# stages"| cut -c1-180
