#!/usr/bin/env bash
# Session 21, call 3 (nvidia-h200-x2): why all_reduce back to back gains less from chains than the
# other collectives: the engine's counts (the new "# engine over the rows" line) and a timeline of
# each, 8 B back to back.
set -uo pipefail
root=$PWD; st=${ST:-$root/.gpu-stage}; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for k in all_reduce reduce_scatter; do
  r ${k}_stats 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll $k -b 8 -e 8 -n 500 -w 50 --many 0 -z 0
  r ${k}_trace 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/$k $st/bin/atomr bench coll $k -b 8 -e 8 -n 500 -w 50 --many 0 -z 0 --rounds 1
done
ls -la $out
grep -E "^===|^ +8 +2 |# engine|# stages" $log | cut -c1-220
