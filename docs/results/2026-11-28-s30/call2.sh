#!/usr/bin/env bash
# Session 30, call 2 (nvidia-h200-x2), 38a439b: the GPU tests (launch/gpu-suite); the large rows
# of every collective with -n 200, three times; the first all_reduce's time over 12 startups with
# CUDA_MODULE_LOADING as CUDA leaves it (lazy) and =EAGER, taking turns; nccl-tests' large rows.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
t0=$SECONDS
timeout 320 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
for i in 1 2 3 4 5 6; do
  r init_lazy_$i 30 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
  r init_eager_$i 30 "${mp[@]}" -x CUDA_MODULE_LOADING=EAGER -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
r nt_large 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 16M -e 1G -f 4 -n 200 -w 20
for i in 1 2 3; do
  for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
    r large_${op}_$i 40 "${mp[@]}" -np 2 $a bench coll $op -b 16M -e 1G -f 4 -n 200 -w 20 --many 0 -J $out/json/large_${op}_$i.json
  done
done
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "rc=[1-9]" $out/suite.txt $log; tail -2 $out/suite.txt; grep -E "^=== init|# startup" $log | cut -c1-200; grep -E "^ +(16777216|67108864|268435456|1073741824) " $log | awk '{print $1, $NF}' | tr '\n' ' '; tail -1 $log
