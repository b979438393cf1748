#!/usr/bin/env bash
# Session 11, call 3 (nvidia-h200-x2): A/B of df46955's engine (atomr_prev, with the new bench harness: --rounds 4) against the engine that issues
# a head whose batch cannot grow without waiting for the devices to drain, and publishes a seal's
# writes once per buffer (atomr), alternating, three rounds; nccl-tests beside them; then the
# then the new engine with packing off (ATOMR_COLL_PACK_BYTES=0).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r nt_ar_z0 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 0
r nt_ar_z1 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
r nt_m1000 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for round in 1 2 3; do
  for b in atomr_prev atomr; do
    A=$st/bin/$b
    r ${b}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_ag_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_many_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done


grep -E "^rc=[1-9]|FAILED" $log
export ATOMR_COLL_PACK_BYTES=0
r atomr_nopack_ar_z0 60 "${mp[@]}" -x ATOMR_COLL_PACK_BYTES -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
r atomr_nopack_ar_z1 60 "${mp[@]}" -x ATOMR_COLL_PACK_BYTES -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
python3 $root/.gpu-tools/ab_table.py $log | sort
