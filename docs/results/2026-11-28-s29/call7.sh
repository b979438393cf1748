#!/usr/bin/env bash
# Session 29, call 7 (nvidia-h200-x2), e38d19a: the first all_reduce's slow mode (167-198 ms in 4
# of call 6's 22 GPU startups): 12 startups with NCCL's default (connections made at the first
# collective that needs them) taking turns with 12 with NCCL_RUNTIME_CONNECT=0 (made in
# ncclCommInitRank); then broadcast 16-64 MiB with -n 200 (call 6: 0.983 / 0.989 with -n 50).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in $(seq 1 12); do
  r start_default_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
  r start_connect0_$i 40 "${mp[@]}" -x NCCL_RUNTIME_CONNECT=0 -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
for i in 1 2; do
  r bcast_$i 90 "${mp[@]}" -np 2 $a bench coll broadcast -b 16M -e 64M -f 4 -n 200 -w 20 --many 0 -J $out/json/bcast_$i.json
done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf json.tar.gz json && rm -rf json)
grep -E "^rc=[1-9]" $log
for k in default connect0; do
  echo "$k: $(grep -A4 "=== start_${k}_" $log | grep -o 'world [0-9.]*, first all_reduce [0-9.]*' | sed 's/world //;s/, first all_reduce /\//' | tr '\n' ' ')"
  echo "$k total: $(grep -A4 "=== start_${k}_" $log | grep -o 'first all_reduce done: [0-9.]*' | sed 's/.*: //' | tr '\n' ' ')"
done
grep -E "^ +16777216|^ +67108864" $log | cut -c1-200; tail -1 $log
