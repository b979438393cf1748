#!/usr/bin/env bash
# Session 15, call 6 (nvidia-h200-x2): base (dff4e02) against inline (call6_inline.diff: a caller
# issues its own request whenever nothing is queued and no agreement is out, even with requests
# in flight, instead of handing it to the progress thread), taking turns, two rounds: small
# collectives back to back, all_reduce -z 1, and 1000 x 2 KiB.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; bins=$root/.gpu-s1/s15; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for i in 1 2; do
  for b in base inline; do
    A=$bins/atomr_$b
    for op in all_reduce all_gather reduce_scatter broadcast; do
      r ${op}_z0_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    done
    r all_reduce_z1_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r many_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log
python3 $root/.gpu-tools/ab_table.py $log
grep -E "^# stages at 8 B, back" $log | head -20
