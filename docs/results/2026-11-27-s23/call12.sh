#!/usr/bin/env bash
# Session 23, call 12 (nvidia-h200-x2): HEAD's binaries (3b7eaee's build) on 1000 x 2 KiB in one
# submit_all call, with nccl-tests' group of 1000 beside them, three rounds taking turns.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c12; mkdir -p "$out"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; lscpu | grep -E "Model name"; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c12.log
r() { local name=$1; shift; echo "=== $name" >> $log; timeout 60 "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  r probe_gpu_$i "${mp[@]}" -np 2 $st/bin/msp_head 300 1000 2048 --gpu
  r nt_m1000_$i "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
  r probe_host_$i "${mp[@]}" -np 2 $st/bin/msp_head 300 1000 2048
done
r many_gpu "${mp[@]}" -np 2 $st/bin/atomr_head bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
r many_host "${mp[@]}" -np 2 $st/bin/atomr_head bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
grep -E "^===|many_small_probe:|^ +2048 +512|many small" $log | cut -c1-220; cat $out/machine.txt
