#!/usr/bin/env bash
# Session 11, call 4 (nvidia-h200-x2): A/B of 35440c6 (atomr_prev) against 54ba7e5 (.gpu-stage's
# atomr: one NCCL state per seal, the assist hook held without an owner), alternating, three
# rounds, with nccl-tests beside them; then the staged GPU test suite (ATOMR_SUITE_PART=tests).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
{ echo "commit: $(cat $root/.gpu-stage/COMMIT) prev: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r nt_ar_z0 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 0
r nt_ar_z1 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
r nt_m1000 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for round in 1 2 3; do
  for b in atomr_prev atomr; do
    A=$st/bin/$b; [[ $b == atomr ]] && A=$root/.gpu-stage/bin/atomr
    r ${b}_ar_z0_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${b}_ar_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${b}_many_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
python3 $root/.gpu-tools/ab_table.py $log | sort
ATOMR_SUITE_PART=tests OUT=$out/suite timeout 420 bash $root/launch/gpu-suite > $out/suite.log 2>&1; echo "suite rc=$?"
tail -40 $out/suite/summary.txt 2>/dev/null || tail -20 $out/suite.log
