#!/usr/bin/env bash
# Session 25, call 1 (nvidia-h200-x2): direct shared-memory all_reduces on the GPU machine's CPUs.
# "copy" is ATOMR_HOST_ARENA_MOST=0 (every host buffer on the heap: the ring's copies, the engine
# of before), "direct" the default; taking turns in one lease. Then the host tests on its cores.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c1; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/HEAD_COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for m in 0 4194304; do
    r many_host_${m}_$i 60 "${mp[@]}" -x ATOMR_HOST_ARENA_MOST=$m -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_host_${m}_$i.json
    r probe_host_${m}_$i 60 "${mp[@]}" -x ATOMR_HOST_ARENA_MOST=$m -np 2 $st/bin/many_small_probe 300 1000 2048
  done
done
for i in 1 2; do
  r host_8b_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0
done
r device_test_arena 60 $st/bin/device_test --gtest_filter='SharedArena*'
r world_collectives_np2 120 "${mp[@]}" -np 2 $st/bin/world_collectives_test
r world_collectives_np4_spin 180 "${mp[@]}" -x ATOMR_SPIN=pause -np 4 $st/bin/world_collectives_test
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "many small|many_small_probe:" $log | cut -c1-200; tail -1 $log
