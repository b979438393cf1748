#!/usr/bin/env bash
# Session 26, call 3 (nvidia-h200-x2): why atomr's large reduce_scatter / all_gather / broadcast
# rows sit at 0.987-0.994 of raw at 1 GiB: raw NCCL on cudaMalloc'd buffers against the device
# actor's pool, with and without an event after each operation (large_coll_probe); the bench rows
# again beside it; and where startup goes (NCCL_DEBUG=INFO's init timings).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r probe_1 120 "${mp[@]}" -np 2 $root/.gpu-pack/large_coll_probe 50 4 67108864 268435456 1073741824
for op in reduce_scatter all_gather broadcast; do
  r large_$op 90 "${mp[@]}" -np 2 $a bench coll $op -b 256M -e 1G -f 4 -n 50 -w 10 --many 0
done
r probe_2 120 "${mp[@]}" -np 2 $root/.gpu-pack/large_coll_probe 50 4 1073741824
for i in 1 2 3; do
  r init_debug_$i 60 "${mp[@]}" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^(all_reduce|reduce_scatter|all_gather|broadcast) " $log; grep -E "^ +(268435456|1073741824) " $log; grep -E "Init timings|# startup" $log | cut -c1-250; tail -1 $log
