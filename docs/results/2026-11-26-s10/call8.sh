#!/usr/bin/env bash
# Session 10, call 8 (nvidia-h200-x2): A/B of a waiting caller looking at its inline operation's
# event itself. atomr_prev = fe60823 (the completion waiter answers every operation); atomr = the
# same with the event look. Three alternating rounds of `bench p2p --max-bytes 64M` and `bench
# device`, then the device and world test programs.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c8; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$out/call8.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi -L; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for b in atomr_prev atomr; do
    r ${b}_p2p_$i 120 $st/bin/$b bench p2p --max-bytes 64M
    r ${b}_device_$i 60 $st/bin/$b bench device
  done
done
for t in gpu_device_test gpu_device_fault_test gpu_buffers_two_gpus_test gpu_module_test gpu_module_fault_test; do
  r $t 300 $st/bin/$t
done
r gpu_buffers_test_np2 300 mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH $st/bin/gpu_buffers_test
r gpu_world_test_np2 300 mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE=0 $st/bin/gpu_world_test
r gpu_world_test_np1 300 mpirun --bind-to none -np 1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE=0 $st/bin/gpu_world_test
grep -vE "^\[ +(RUN|OK) +\]|^\[-|^$" $log | grep -vE "^bandwidth|^atomr bench|^cudaStream|^case" | grep -vE "^=== gpu|^\[" | tail -80; grep -E "^=== gpu|PASSED|FAILED|^rc=" $log | tail -30
