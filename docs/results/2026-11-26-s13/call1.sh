#!/usr/bin/env bash
# Session 13, call 1: the GPU tests with the new wait (a waiting caller blocks on its request's CUDA
# events, ATOMR_WAIT_SYNC=1), then A/B alternating, three rounds: the previous engine (atomr_old:
# 1e8a648, the code of 170dcfe), the new binary with ATOMR_WAIT_SYNC=0 (polling, as before) and =1.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_WAIT_SYNC -x ATOMR_WAIT_ASSIST)
log=$out/c1.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
export ATOMR_WAIT_SYNC=1 ATOMR_WAIT_ASSIST=auto
r gpu_world_np2 120 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r gpu_world_np1 120 "${mp[@]}" -np 1 $st/bin/gpu_world_test
r gpu_world_failure 60 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
ATOMR_WAIT_ASSIST=0 r block_assist0 60 "${mp[@]}" -np 2 $st/bin/gpu_world_test --gtest_filter='*Block*:*Assist*'
ATOMR_WAIT_SYNC=0 r block_sync0 60 "${mp[@]}" -np 2 $st/bin/gpu_world_test --gtest_filter='*Block*:*Assist*'
ATOMR_WAIT_SYNC=0 r failure_sync0 60 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
grep -E "^===|PASSED|FAILED|^rc=" $log > $out/tests_summary.txt
for round in 1 2 3; do
  for v in old new0 new1; do
    A=$st/bin/atomr; [[ $v == old ]] && A=$root/.gpu-s1/ab/atomr_old
    export ATOMR_WAIT_SYNC=1; [[ $v == new0 ]] && export ATOMR_WAIT_SYNC=0
    r ${v}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${v}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${v}_bc_z1_$round 60 "${mp[@]}" -np 2 $A bench coll broadcast -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
    r ${v}_rs_z1_$round 60 "${mp[@]}" -np 2 $A bench coll reduce_scatter -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
    r ${v}_g2_z1_$round 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
  done
done
export ATOMR_WAIT_SYNC=1
r a2a_16m 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_to_all -b 16M -e 64M -f 2 -n 50 -w 10
grep -E "^rc=[1-9]|FAILED" $log
python3 $root/.gpu-tools/ab_table.py $log | sort > $out/ab.txt
cat $out/ab.txt
