#!/usr/bin/env bash
# Session 13, call 3: the GPU tests with the working tree (after a request completes, the head of
# the queue is issued in the same look; a host buffer's write marks read without the lock), then
# A/B alternating, three rounds: atomr_old (5f26cce, the code of 6283459) against the new binary,
# on the host backend's rows (8 B back to back and waited for, many small) and the NCCL
# all_reduce rows.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname) new: $(cat $st/COMMIT) old: $(cat $root/.gpu-s1/ab/COMMIT)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r gpu_world_np2 120 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r gpu_world_np1 120 "${mp[@]}" -np 1 $st/bin/gpu_world_test
r gpu_world_failure 60 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
r world_collectives_np4 120 "${mp[@]}" -np 4 $st/bin/world_collectives_test
grep -E "^===|PASSED|FAILED|^rc=" $log > $out/tests_summary.txt
for round in 1 2 3; do
  for v in old new; do
    A=$st/bin/atomr; [[ $v == old ]] && A=$root/.gpu-s1/ab/atomr_old
    r ${v}_host_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 0
    r ${v}_host_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 1
    r ${v}_hostmany_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
    r ${v}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${v}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
  done
done
grep -E "^rc=[1-9]|FAILED" $log
python3 $root/.gpu-tools/ab_table.py $log | sort > $out/ab.txt
cat $out/ab.txt
grep -E "^=== |many small" $log | grep -A1 "hostmany" | grep -o "^=== [a-z_0-9]*\|raw sequential [0-9.]* us\|concurrent [0-9.]* us\|one submit_all call [0-9.]* us" | paste - - - -
