#!/usr/bin/env bash
# Session 14, call 1 (b12f1da, staged by launch/stage-gpu): the device tests at one and two ranks
# (the caller's completion probe), then bench p2p and bench device, the previous binary (6c71d40)
# and this one taking turns, three rounds.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; nvidia-smi topo -m; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR)
NEW=$st/bin/atomr; OLD=$root/.gpu-s1/ab14/atomr_old; log=$out/c1.log; tl=$out/tests.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t() { local name=$1; shift; local s=$SECONDS; timeout 200 "$@" > $out/$name.log 2>&1; echo "$name rc=$? $((SECONDS - s))s" | tee -a $tl; }
t device_np1 "${mp[@]}" -np 1 $st/bin/gpu_device_test
t device_np2 "${mp[@]}" -np 2 $st/bin/gpu_device_test
t device_fault_np1 "${mp[@]}" -np 1 $st/bin/gpu_device_fault_test
t device_fault_np2 "${mp[@]}" -np 2 $st/bin/gpu_device_fault_test
t module_fault_np1 "${mp[@]}" -np 1 $st/bin/gpu_module_fault_test
t module_np1 "${mp[@]}" -np 1 $st/bin/gpu_module_test
t buffers_np2 "${mp[@]}" -np 2 $st/bin/gpu_buffers_test
t buffers_two_gpus "${mp[@]}" -np 1 $st/bin/gpu_buffers_two_gpus_test
for i in 1 2 3; do
  r p2p_old_$i 90 $OLD bench p2p
  r p2p_new_$i 90 $NEW bench p2p
done
for i in 1 2; do
  r device_old_$i 90 $OLD bench device
  r device_new_$i 90 $NEW bench device
done
grep -E "^rc=[1-9]" $log
grep -E "^=== p2p|^(4096|16384|65536|262144|1048576|67108864) " $log
grep -E "^=== device|^(upload|download|run)|hops" $log
