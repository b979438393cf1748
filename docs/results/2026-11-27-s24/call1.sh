#!/usr/bin/env bash
# Session 24, call 1 (nvidia-h200-x2): finished requests freed as calls come back to back, and
# request/promise storage recycled (new = 052b85e) against old (3b7eaee, the twenty-third
# session's engine), taking turns: many_small_probe back to back (host and NCCL; new also with
# --gap), bench coll --many 1000 (host and NCCL), bench p2p; nccl-tests' group of 1000 beside.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c1; mkdir -p "$out"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
atomr() { case $1 in old) echo $st/bin/atomr_old;; new) echo $st/bin/atomr;; esac; }
probe() { case $1 in old) echo $st/bin/msp_old;; new) echo $st/bin/many_small_probe;; esac; }
for i in 1 2 3; do
  for v in old new; do
    r ${v}_probe_gpu_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048 --gpu
    r ${v}_probe_host_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048
  done
  r new_probe_gpu_gap_$i 60 "${mp[@]}" -np 2 $(probe new) 300 1000 2048 --gpu --gap
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2; do
  for v in old new; do
    r ${v}_many_gpu_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
    r ${v}_many_host_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
for i in 1 2; do
  for v in old new; do
    r ${v}_p2p_$i 60 $(atomr $v) bench p2p --max-bytes 64M
  done
done
echo "total ${SECONDS}s" >> $log
