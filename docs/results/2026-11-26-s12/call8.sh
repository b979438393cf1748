#!/usr/bin/env bash
# Session 12, call 8 (nvidia-h200-x2): A/B alternating, three rounds: 564a8dc (atomr_old) against
# the final engine (atomr_fix: 1b9e0c7 + an assisting caller seals what its stream query cannot
# cover), on the many-small row and the 8 B-1 MiB all_reduce rows.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r nt_m1000 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for round in 1 2 3; do
  for b in atomr_old atomr_fix; do
    A=$st/ab/$b
    r ${b}_many_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
    r ${b}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  done
done
grep -E "^rc=[1-9]|FAILED" $log
python3 $root/.gpu-tools/ab_table.py $log | sort
grep -E "^===|many small" $log | grep -A1 "_many_" | grep -o "^=== [a-z_0-9]*\|concurrent [0-9.]* us\|one submit_all call [0-9.]* us" | paste - - -
