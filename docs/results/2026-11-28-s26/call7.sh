#!/usr/bin/env bash
# Session 26, call 7 (nvidia-h200-x2): HEAD (a sender whose operation would go by mail only
# because the device thread has not yet taken the last message or two waits up to 8 us for it)
# against atomr_prev (1323dbf): bench p2p and bench device taking turns; then the GPU tests.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3; do
  r p2p_prev_$i 60 $ab/atomr_prev bench p2p --max-bytes 64M
  r p2p_new_$i 60 $st/bin/atomr bench p2p --max-bytes 64M
done
for i in 1 2; do
  r device_prev_$i 60 $ab/atomr_prev bench device
  r device_new_$i 60 $st/bin/atomr bench device
done
t0=$SECONDS
timeout 330 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |^(4096|16384|65536|262144|1048576|67108864) |^run" $log | cut -c1-150; tail -3 $out/suite.txt
