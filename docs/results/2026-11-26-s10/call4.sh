#!/usr/bin/env bash
# Session 10, call 4 (nvidia-h200-x2): A/B of the device actor's retiring. atomr_prev = peer copies by
# cudaMemcpyAsync, a poll_op to the device actor after every completion; atomr = the same with the
# completion waiter waking the actor only once it goes quiet (or every 64). Three alternating
# rounds of `bench p2p --max-bytes 64M` and `bench device`, then the device test programs.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c4; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$out/call4.log
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
grep -vE "^\[ +(RUN|OK) +\]|^\[-|^$" $log | grep -vE "^bandwidth|^atomr bench|^cudaStream|^case" | tail -150
