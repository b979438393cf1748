#!/usr/bin/env bash
# Session 21, call 6 (nvidia-h200-x2): timelines of all_reduce 8 B back to back, new (early
# exchange) and hx (exchange by host_allreduce, posted when the plan runs out): how long the
# plan agreements take now, and where the chains break.
set -uo pipefail
root=$PWD; st=${ST:-$root/.gpu-stage}; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for e in new hx; do
    r ${e}_trace_$i 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/${e}_$i $st/bin/atomr$([[ $e == new ]] || echo _$e) bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 0 -z 0 --rounds 1
  done
done
rm -f $out/*.rank1.json*
grep -E "^===|^ +8 +2 |# engine|# stages" $log | cut -c1-220
