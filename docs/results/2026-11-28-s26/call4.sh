#!/usr/bin/env bash
# Session 26, call 4 (nvidia-h200-x2): (1) bench p2p's copies back to back run at 0.3-0.5 of raw
# at 4-256 KiB: peer_copy_probe's cudaMemcpyAsync on pool memory with an event after each, with
# and without a second thread synchronizing each event (the device actor's completion waiter), or
# only the newest; (2) large_coll_probe at 1 GiB with a second communicator (bench coll's raw
# column runs on its own).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) probes: $(git -C $root rev-parse HEAD 2>/dev/null) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r peer_copy_probe 120 $root/.gpu-pack/peer_copy_probe 4096 65536 262144
r large_1 120 "${mp[@]}" -np 2 $root/.gpu-pack/large_coll_probe 50 4 268435456 1073741824
r large_2 120 "${mp[@]}" -np 2 $root/.gpu-pack/large_coll_probe 50 4 1073741824
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "round|bw |^(all_reduce|reduce_scatter|all_gather|broadcast) " $log; tail -1 $log
