#!/usr/bin/env bash
# Session 8, call 10: many small in one submit_all call (packing inside the latency window), and
# gpu_world_test at 2 ranks and at 1 rank with the new tests.
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c10; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c10.log
echo "commit $(cat $s1/COMMIT)" > $log
for i in 1 2; do
  for b in 3f89638 new; do
    A=$s1/bin/atomr; [[ $b == 3f89638 ]] && A=$s1/bin/atomr_3f89638
    echo "=== many_${b}_$i: mpirun -np 2 atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000" >> $log
    timeout 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 >> $log 2>&1
  done
done
echo "=== gpu_world_test np2" >> $log
timeout 120 "${mp[@]}" -np 2 $s1/bin/gpu_world_test >> $out/gpu_world_test_np2.txt 2>&1; echo "np2 rc=$?" >> $log
echo "=== gpu_world_test np1" >> $log
timeout 120 "${mp[@]}" -np 1 $s1/bin/gpu_world_test >> $out/gpu_world_test_np1.txt 2>&1; echo "np1 rc=$?" >> $log
grep -h "tests ran\|PASSED\|FAILED" $out/gpu_world_test_np*.txt | sed 's/\x1b\[[0-9;]*m//g' >> $log
grep -E "^===|many small|rc=|PASSED|FAILED|tests ran|commit" $log
