#!/usr/bin/env bash
# Session 10, call 5 (nvidia-h200-x2): the request timeline of 1000 x 2 KiB all_reduces in one
# submit_all call (ATOMR_TRACE, last 1000 requests kept), summarised batch by batch
# (launch/trace-batches), and the --many row twice more without the timeline.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c5; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mp=(mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/call5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r many_traced 120 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
for i in 1 2; do r many_$i 120 "${mp[@]}" $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000; done
python3 $st/trace-batches $out/many.rank0.json $out/many.rank1.json >> $log 2>&1
gzip $out/many.rank*.json
grep -E "^===|many small|stages|^rc=|rank|first seq|^ +[0-9]+ +[0-9]+ " $log | cut -c1-300
