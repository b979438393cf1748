#!/usr/bin/env bash
# Session 27, call 8 (nvidia-h200-x2), HEAD's binaries (316a5ba): the waited-for small rows that
# were over raw + 1.5 us in call 6 (reduce_scatter for HEAD, all_gather for the binary before),
# three runs each, taking turns.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3; do
  for op in reduce_scatter all_gather; do
    r ${op}_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1 -J $out/json/${op}_z1_$i.json
  done
done
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; tail -1 $log
