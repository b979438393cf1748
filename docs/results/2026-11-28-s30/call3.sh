#!/usr/bin/env bash
# Session 30, call 3 (nvidia-h200-x2): 1000 x 2 KiB all_reduces in one call, d6fbc6b (finished
# requests freed by the next caller; pointers read from the request) against 38a439b (before it),
# taking turns: many_small_probe --gpu with --group and with submit_all, and bench coll --many;
# nccl-tests' group of 1000 beside them.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c3; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) (old: 38a439b) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4; do
  for how in --group ""; do
    r probe_old${how}_$i 30 "${mp[@]}" -np 2 $ab/probe_38a 300 1000 2048 --gpu $how
    r probe_new${how}_$i 30 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu $how
  done
done
for i in 1 2 3; do
  r bench_old_$i 40 "${mp[@]}" -np 2 $ab/atomr_38a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_old_$i.json
  r bench_new_$i 40 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_new_$i.json
done
r nt_m1000_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r nt_m1000_2 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|^ +2048 " $log | sed 's/mpirun.*-np 2 //' | cut -c1-330; tail -1 $log
