#!/usr/bin/env bash
# Session 10, call 10 (nvidia-h200-x2): A/B of taking a lock only once its holder is done.
# atomr_prev = edb4626; atomr = the completion waiter's count moved after its lock, and the
# progress thread trying the inbox lock instead of waiting on it. Alternating rounds of `bench p2p
# --max-bytes 1M`, `bench device`, the many-small row and the small all_reduce rows (nccl-tests'
# group of 1000 once), then the test programs that cover the change.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c10; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GTEST_COLOR=no
mp=(mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/call10.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi -L; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for b in atomr_prev atomr; do
    r ${b}_p2p_$i 60 $st/bin/$b bench p2p --max-bytes 1M
    r ${b}_device_$i 60 $st/bin/$b bench device
    r ${b}_many_$i 60 "${mp[@]}" $st/bin/$b bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r nt_m1000 60 "${mp[@]}" $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2; do
  for b in atomr_prev atomr; do
    for z in 0 1; do r ${b}_small_z${z}_$i 60 "${mp[@]}" $st/bin/$b bench coll all_reduce -b 8 -e 64K -f 8 -n 2000 -w 100 --many 0 -z $z; done
  done
done
for t in gpu_device_test gpu_device_fault_test gpu_buffers_two_gpus_test; do r $t 120 $st/bin/$t; done
r gpu_world_test_np2 200 mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE $st/bin/gpu_world_test
r gpu_world_test_np1 200 mpirun --bind-to none -np 1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE $st/bin/gpu_world_test
grep -E "^=== gpu|PASSED|FAILED|^rc=[1-9]" $log | tail -20
