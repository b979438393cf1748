#!/usr/bin/env bash
# Session 12, call 5 (nvidia-h200-x2): where a waited-for 8 B all_reduce's time goes (411efa9):
# ATOMR_TRACE of -z 1 runs, cut per request into its stages and the caller's time outside them
# (.gpu-tools/z1_gaps.py).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
A=$st/ab/atomr_new
for i in 1 2; do
  r nt_z1_$i 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 8 -n 5000 -w 100 -z 1
  r plain_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 5000 -w 100 --many 0 -z 1
  r trace_z1_$i 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/t$i $A bench coll all_reduce -b 8 -e 8 -n 5000 -w 100 --many 0 -z 1
  r trace_nopack_z1_$i 60 "${mp[@]}" -np 2 -x ATOMR_COLL_PACK_BYTES=0 -x ATOMR_TRACE=$out/np$i $A bench coll all_reduce -b 8 -e 8 -n 5000 -w 100 --many 0 -z 1
done
for f in $out/t*.rank*.json $out/np*.rank*.json; do python3 $root/.gpu-tools/z1_gaps.py $f 4000 >> $out/z1_gaps.txt 2>&1; done
gzip $out/*.json
grep -E "^rc=[1-9]" $log; grep -E "^===|^ +8 |stages" $log | cut -c1-170; cat $out/z1_gaps.txt
