#!/usr/bin/env bash
# Session 17, call 7 (nvidia-h200-x2, engine as 12a9079): 1000 x 2 KiB all_reduces in one
# submit_all call with waiting callers assisting (ATOMR_WAIT_ASSIST=1, the default here) and not
# (0), four rounds taking turns, then one traced run of each.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
A=$st/bin/atomr
log=$out/c7.log
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  for a in 1 0; do
    r assist${a}_$i 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=$a -np 2 $A bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  done
done
for a in 1 0; do
  r traced_assist$a 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=$a -x ATOMR_TRACE=$out/t$a -x ATOMR_TRACE_REQUESTS=1000 -np 2 $A bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  python3 launch/trace-batches $out/t$a.rank0.json >> $log 2>&1
done
grep -E "^=== |many small|first seq|^ +[0-9]+ +[0-9]+ " $log | sed 's/(the call returned/\n    (returned/' | cut -c1-200
rm -f $out/*.json
