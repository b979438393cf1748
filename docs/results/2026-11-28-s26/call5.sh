#!/usr/bin/env bash
# Session 26, call 5 (nvidia-h200-x2): bench p2p's copies back to back. atomr_a: HEAD plus the
# count of operations run inline and by mail (bench p2p's "inline bw/lat" column); atomr_b: the
# same without the completion thread's retire request after every 64 completions (only after its
# queue stayed empty for 50 us). Taking turns, three rounds; bench device the same.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3; do
  r p2p_a_$i 60 $ab/atomr_a bench p2p --max-bytes 64M
  r p2p_b_$i 60 $ab/atomr_b bench p2p --max-bytes 64M
done
for i in 1 2; do
  r device_a_$i 60 $ab/atomr_a bench device
  r device_b_$i 60 $ab/atomr_b bench device
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |^(4096|65536|262144|1048576|67108864) |^run" $log | cut -c1-150; tail -1 $log
