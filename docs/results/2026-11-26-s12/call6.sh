#!/usr/bin/env bash
# Session 12, call 6 (nvidia-h200-x2): the waiting caller that asks whether the streams ran dry
# instead of sealing (atomr_idle, the working tree after dae5668) against 411efa9 (atomr_new):
# gpu_world_test at 2 ranks and at 1 rank x 2 GPUs and gpu_world_failure_test with the new
# engine first, then A/B alternating, three rounds.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local t0=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}-${t0} s)" >> $log; }
r gpu_world_test_np2 120 "${mp[@]}" -np 2 $st/ab/gpu_world_test
r gpu_world_test_np1 120 "${mp[@]}" -np 1 $st/ab/gpu_world_test
r gpu_world_failure_test_np2 120 "${mp[@]}" -np 2 $st/ab/gpu_world_failure_test
grep -E "^===|^rc=|PASSED|FAILED" $log
r nt_ar_z1 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
for round in 1 2 3; do
  for b in atomr_new atomr_idle; do
    A=$st/ab/$b
    r ${b}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_rs_z1_$round 60 "${mp[@]}" -np 2 $A bench coll reduce_scatter -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_ag_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_g2_z1_$round 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  done
done
grep -E "^rc=[1-9]|FAILED" $log
python3 $root/.gpu-tools/ab_table.py $log | sort
