#!/usr/bin/env bash
# Session 27, call 1 (nvidia-h200-x2), HEAD's binaries: (a) startup, the first all_reduce split
# from its buffer, with the request timeline, and with NCCL's INFO log in some runs, to find the
# ~200 ms first all_reduce seen in 9 of 33 runs; (b) the many-small rows (NCCL, host) beside
# nccl-tests' group of 1000, and a timeline of many_small_probe --gpu (launch/trace-batches).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out/tr" "$out/nccl"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version,persistence_mode --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4 5 6 7 8 9 10; do
  ATOMR_TRACE=$out/tr/init$i r init_$i 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x ATOMR_TRACE $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
for i in 1 2 3 4 5 6; do
  echo "=== init_nccl_$i" >> $log
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALL ATOMR_LOG=debug timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS -x ATOMR_LOG $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 > $out/nccl/init$i.txt 2>&1
  echo "rc=$? (${SECONDS}s)" >> $log; grep "# startup" $out/nccl/init$i.txt >> $log
done
for i in 1 2 3; do
  r many_gpu_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
for i in 1 2; do
  r many_host_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
r probe_gpu 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
r probe_gpu_traced 60 "${mp[@]}" -x ATOMR_TRACE=$out/tr/many -x ATOMR_TRACE_REQUESTS=4000 -np 2 $st/bin/many_small_probe 100 1000 2048 --gpu
for k in 0 1; do echo "--- many rank $k" >> $log; python3 launch/trace-batches $out/tr/many.rank$k.json >> $log 2>&1; done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf tr.tar.gz tr nccl && rm -rf tr nccl)
grep -E "^rc=[1-9]" $log; grep -E "many small|# startup|Avg bus|many_small_probe:" $log | cut -c1-230; tail -1 $log
