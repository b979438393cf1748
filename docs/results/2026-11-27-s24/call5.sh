#!/usr/bin/env bash
# Session 24, call 5 (nvidia-h200-x2): buffer_block laid out by writer (the write count and the
# write marks on lines of their own; "layout", the working tree after 66efd6e) against 052b85e
# ("prev"), taking turns: many_small_probe (NCCL back to back and --gap, host), bench coll --many
# 1000, the small all_reduce rows (-z 0 and -z 1) and bench p2p.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
atomr() { case $1 in prev) echo $st/bin/atomr;; layout) echo $st/bin/atomr_layout;; esac; }
probe() { case $1 in prev) echo $st/bin/many_small_probe;; layout) echo $st/bin/msp_layout;; esac; }
for i in 1 2 3; do
  for v in prev layout; do
    r ${v}_probe_gpu_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048 --gpu
    r ${v}_probe_gpu_gap_$i 60 "${mp[@]}" -np 2 $(probe $v) 200 1000 2048 --gpu --gap
    r ${v}_probe_host_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048
  done
done
for i in 1 2; do
  for v in prev layout; do
    r ${v}_many_gpu_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
for v in prev layout; do
  for z in 0 1; do
    r ${v}_small_z${z} 90 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z
  done
  r ${v}_p2p 60 $(atomr $v) bench p2p --max-bytes 1M
done
echo "total ${SECONDS}s" >> $log
grep -E "^=== |many_small_probe:|# many small" $log | grep -B1 -E "many_small_probe:|# many small" | grep -v "^--" | paste - - | sed -E 's/=== ([a-z_0-9]+):.*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/; s/=== ([a-z_0-9]+):.*raw sequential ([0-9.]+) us, atomr concurrent ([0-9.]+) us: ([0-9.]+x).*call ([0-9.]+) us: ([0-9.]+x) \(the call returned after ([0-9.]+) us.*/\1 seq \2 conc \3 \4 one \5 \6 ret \7/' | sort
