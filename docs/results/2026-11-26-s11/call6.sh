#!/usr/bin/env bash
# Session 11, call 6 (nvidia-h200-x2): do the new engine's runs stall? Calls 3 and 5 had three
# rows of 50-130 ms extra (one 8 B column each) with the new engine, none with the old. Six
# alternating rounds of the old engine (df46955's, with the new bench; atomr_prev) and the new
# one (.gpu-stage's atomr: 54ba7e5 plus the assisting caller's kick), then every issue-12 row
# with the new one (call5.sh).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for round in 1 2 3 4 5 6; do
  for b in atomr_prev atomr; do
    A=$st/bin/$b; [[ $b == atomr ]] && A=$root/.gpu-stage/bin/atomr
    r ${b}_many_$round 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000
    r ${b}_ag_z1_$round 60 "${mp[@]}" -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
  done
done
python3 $root/.gpu-tools/ab_table.py $log | sort
bash $root/docs/results/2026-11-26-s11/call5.sh > $out/call5.out 2>&1
tail -30 $out/call5.out
