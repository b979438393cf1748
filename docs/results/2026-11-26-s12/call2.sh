#!/usr/bin/env bash
# Session 12, call 2 (nvidia-h200-x2): A/B, alternating, three rounds: 564a8dc's engine (atomr_old)
# against the engine whose inline-issuing caller leaves the seal to the next look (atomr_new).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r nt_ar_z0 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 0
r nt_ar_z1 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
for round in 1 2 3; do
  for b in atomr_old atomr_new; do
    A=$st/ab/$b
    r ${b}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_ag_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_bc_z0_$round 60 "${mp[@]}" -np 2 $A bench coll broadcast -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_g2_z0_$round 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  done
done
grep -E "^rc=[1-9]|FAILED" $log
python3 $root/.gpu-tools/ab_table.py $log | sort
