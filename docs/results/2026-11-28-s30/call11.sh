#!/usr/bin/env bash
# Session 30, call 11 (nvidia-h200-x2): 1000 x 2 KiB all_reduces in one call with
# ATOMR_COLL_CALL_BATCH 256 (the default) / 512 / 1024 taking turns, many_small_probe --gpu
# (now reading the environment) with --group and with submit_all, four rounds.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c11; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c11.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 150 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4; do
  for how in --group ""; do
    for b in 256 512 1024; do
      r b${b}${how}_$i 20 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=$b -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu $how
    done
  done
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:" $log | sed 's/mpirun.*ATOMR_COLL_CALL_BATCH=//; s/ -np 2.*probe//' | cut -c1-200; tail -1 $log
