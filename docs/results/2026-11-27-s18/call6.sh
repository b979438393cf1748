#!/usr/bin/env bash
# Session 18, call 6 (nvidia-h200-x2): the small rows back to back, old (5cd3b64) against new
# (4b1beee), taking turns in one lease: all_reduce, all_gather, reduce_scatter, 8 B-1 MiB.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for op in reduce_scatter all_gather all_reduce; do
    r old_${op}_$i 60 "${mp[@]}" -np 2 $st/old/atomr bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r new_${op}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  done
done
grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
