#!/usr/bin/env bash
# Session 28, call 2 (nvidia-h200-x2): the call plan's batch size (ATOMR_COLL_CALL_BATCH 128, 256,
# 512; 4d22655) against the session before's binaries (b1eaffc), taking turns, three rounds:
# many_small_probe --gpu and bench coll --many 1000 (NCCL); nccl-tests' group of 1000 beside them.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_COLL_CALL_BATCH)
a=$st/bin/atomr
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3; do
  for b in 128 256 512; do
    export ATOMR_COLL_CALL_BATCH=$b
    r probe_b${b}_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  done
  export ATOMR_COLL_CALL_BATCH=256
  r probe_old_$i 60 "${mp[@]}" -np 2 $ab/probe_b1e 300 1000 2048 --gpu
done
r nt_m1000_1 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do
  for b in 128 256 512; do
    export ATOMR_COLL_CALL_BATCH=$b
    r many_b${b}_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
  export ATOMR_COLL_CALL_BATCH=256
  r many_old_$i 60 "${mp[@]}" -np 2 $ab/atomr_b1e bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
r nt_m1000_2 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many small|many_small_probe:|^ +2048 " $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/' | cut -c1-230; tail -1 $log
