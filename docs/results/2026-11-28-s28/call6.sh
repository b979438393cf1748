#!/usr/bin/env bash
# Session 28, call 6 (nvidia-h200-x2): HEAD's code (call 5's, and a planned request's count not checked twice)
# against the session before's binaries (b1eaffc),
# taking turns: many_small_probe --gpu, bench coll --many 1000 (NCCL, host), nccl-tests' group of
# 1000 beside them, and a timeline of the new probe.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c6; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4; do
  r probe_new_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r probe_old_$i 60 "${mp[@]}" -np 2 $ab/probe_b1e 300 1000 2048 --gpu
done
r nt_m1000_1 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3 4; do
  r many_new_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  r many_old_$i 60 "${mp[@]}" -np 2 $ab/atomr_b1e bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
r nt_m1000_2 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2; do
  r many_host_new_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
  r many_host_old_$i 60 "${mp[@]}" -np 2 $ab/atomr_b1e bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
done
r probe_traced 60 "${mp[@]}" -x ATOMR_TRACE=$out/tr/many -x ATOMR_TRACE_REQUESTS=4000 -np 2 $st/bin/many_small_probe 100 1000 2048 --gpu
for k in 0 1; do echo "--- many rank $k" >> $log; python3 launch/trace-batches $out/tr/many.rank$k.json >> $log 2>&1; done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf tr.tar.gz tr && rm -rf tr)
grep -E "^rc=[1-9]" $log; grep -E "^=== |many small|many_small_probe:|^ +2048 " $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/' | cut -c1-230; tail -1 $log
