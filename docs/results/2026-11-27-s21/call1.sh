#!/usr/bin/env bash
# Session 21, call 1 (nvidia-h200-x2): where a back-to-back small all_reduce's time goes.
# (1) nccl_path_probe with run graphs (K all_reduces in one graph, launched once per K): the GPUs'
# time per operation, eager / one graph per operation / a run graph; (2) bench coll all_reduce back
# to back with CUDA graphs on and off, taking turns; (3) the same 8 B row under the sampling
# profiler, per thread.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
for irq in $(grep -i nvidia /proc/interrupts | awk -F: '{print $1}'); do
  echo "irq $irq effective $(cat /proc/irq/$irq/effective_affinity_list)" >> $out/machine.txt
done
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r probe 120 "${mp[@]}" -np 2 -x ATOMR_PROBE_MODES=short $st/bin/nccl_path_probe 4000
for i in 1 2; do
  for g in 1 0; do
    r ar_graphs${g}_$i 40 "${mp[@]}" -np 2 -x ATOMR_NCCL_GRAPHS=$g $st/bin/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z 0
  done
done
r profile 60 "${mp[@]}" -np 2 -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof \
  $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20000 -w 500 --many 0 -z 0 --rounds 1
python3 launch/pc-profile-report --threads --raw-out $out/prof.raw $out/prof.*.txt > $out/profile.txt 2>&1
rm -f $out/prof.*.txt
grep -E "^rc=[1-9]" $log
grep -E "^round|run graph" $log
grep -E "^=== ar|^ +8 +2 |# stages" $log | cut -c1-200
head -c 6000 $out/profile.txt
