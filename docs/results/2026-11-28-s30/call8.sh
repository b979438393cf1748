#!/usr/bin/env bash
# Session 30, call 8 (nvidia-h200-x2), abecb6d: 1000 x 2 KiB all_reduces in one call with
# ATOMR_COLL_CALL_BATCH 256 (the default) / 512 / 1024 taking turns (bench coll --many reads the
# environment; many_small_probe does not), four rounds; nccl-tests' group beside them.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4; do
  for b in 256 512 1024; do
    r batch${b}_$i 30 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=$b -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/batch${b}_$i.json
  done
done
r nt_m1000_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small|^ +2048 " $log | sed 's/mpirun.*ATOMR_COLL_CALL_BATCH=//' | cut -c1-330; tail -1 $log
