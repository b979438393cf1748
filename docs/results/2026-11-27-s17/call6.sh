#!/usr/bin/env bash
# Session 17, call 6 (nvidia-h200-x2, 0e61fc9 engine as 12a9079): where 1000 x 2 KiB all_reduces
# in one submit_all call spend their time now: the request timeline (ATOMR_TRACE) of three runs,
# summarised batch by batch (launch/trace-batches), beside three untraced runs.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
A=$st/bin/atomr
log=$out/c6.log
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  r plain_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  r traced_$i 60 "${mp[@]}" -x ATOMR_TRACE=$out/many$i -x ATOMR_TRACE_REQUESTS=1000 -np 2 $A bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  for k in 0 1; do python3 launch/trace-batches $out/many$i.rank$k.json >> $log 2>&1; done
done
grep -E "^=== |many small|first seq|^ +[0-9]+ +[0-9]+ " $log | cut -c1-200
rm -f $out/*.json
