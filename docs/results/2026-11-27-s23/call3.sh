#!/usr/bin/env bash
# Session 23, call 3 (nvidia-h200-x2): 1000 x 2 KiB in one submit_all call, old (f851b86), v1
# (ef9f0bc: the first part only started by the caller) and new (the caller only posts the first
# part's offer; whole parts issued as they come, not held in the packing window) taking turns:
# many_small_probe (host and NCCL), bench coll --many, nccl-tests' group of 1000.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c3; mkdir -p "$out/keep"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
atomr() { case $1 in old) echo $st/bin/atomr_old;; v1) echo $st/bin/atomr_v1;; new) echo $st/bin/atomr;; esac; }
probe() { case $1 in old) echo $st/bin/msp_old;; v1) echo $st/bin/msp_v1;; new) echo $st/bin/many_small_probe;; esac; }
t0=$SECONDS
for i in 1 2 3; do
  for v in old v1 new; do
    r ${v}_probe_host_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048
    r ${v}_probe_gpu_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048 --gpu
  done
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
for i in 1 2; do
  for v in old v1 new; do
    r ${v}_many_host_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
    r ${v}_many_gpu_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
echo "all done in $((SECONDS-t0)) s" >> $log
rm -rf $out/keep
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small|^ +2048 +| +(8|262144|1048576) +[0-9]+ +float" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-230
