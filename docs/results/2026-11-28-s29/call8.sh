#!/usr/bin/env bash
# Session 29, call 8 (nvidia-h200-x2), e38d19a: does atomr's own NCCL_RUNTIME_CONNECT=0 (set by
# connect_nccl_at_init before the world's ncclCommInitRankConfig) reach NCCL? One startup of each
# kind with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV; then 12 more startups of each, taking turns.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)" > $out/machine.txt
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r debug_default 40 "${mp[@]}" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
r debug_connect0 40 "${mp[@]}" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV -x NCCL_RUNTIME_CONNECT=0 -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
for i in $(seq 1 12); do
  r start_default_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
  r start_connect0_$i 40 "${mp[@]}" -x NCCL_RUNTIME_CONNECT=0 -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log
for k in debug_default debug_connect0; do echo "--- $k"; awk "/=== $k:/{f=1;next} /^=== /{f=0} f" $log | grep -iE "RUNTIME_CONNECT|Connected all|ncclCommInitRank comm|Init COMPLETE|startup, max" | cut -c1-220 | head -14; done
for k in default connect0; do
  echo "$k: $(grep -A4 "=== start_${k}_" $log | grep -o 'world [0-9.]*, first all_reduce [0-9.]*' | sed 's/world //;s/, first all_reduce /\//' | tr '\n' ' ')"
done
tail -1 $log
