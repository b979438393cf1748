#!/usr/bin/env bash
# Session 29, call 3 (nvidia-h200-x2), 2b32685 (cache-line layout): many_small_probe --gpu taking
# turns with e6ecfe0 (the session's start) and af4381e (promise state not zeroed); bench coll
# --many 1000 and nccl-tests' group; all_to_all 16 MiB traced (ATOMR_TRACE), 40 rounds.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c3; mkdir -p "$out/json" "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r c2c 60 $ab/c2c 0 1 0 16
for i in 1 2 3 4 5; do
  r probe_lay_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r probe_af4_$i 60 "${mp[@]}" -np 2 $ab/probe_af4 300 1000 2048 --gpu
  r probe_e6e_$i 60 "${mp[@]}" -np 2 $ab/probe_e6e 300 1000 2048 --gpu
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do
  r many_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
for i in 1 2; do
  r a2a_traced_$i 90 "${mp[@]}" -x ATOMR_TRACE=$out/tr/a2a_$i -x ATOMR_TRACE_REQUESTS=2000 -np 2 $a bench coll all_to_all -b 16M -e 16M -n 400 -w 20 --rounds 40 --many 0 -J $out/json/a2a_$i.json
done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf json.tar.gz json tr && rm -rf json tr)
grep -E "^rc=[1-9]" $log; grep -E "^=== |cpus|many small|many_small_probe:|^ +2048 |^ +16777216" $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/' | cut -c1-200; tail -1 $log
