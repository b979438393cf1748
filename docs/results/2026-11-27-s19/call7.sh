#!/usr/bin/env bash
# Session 19, call 7 (nvidia-h200-x2): call 6 measured all_to_all waited for (-z 1) at about
# 50 us against 17 raw, where earlier leases had it at raw. prev (bb89fdb), pool (26b4ce9) and
# new (ec77093) taking turns on that row and on all_reduce -z 1.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) pool: $(cat $st/pool/COMMIT) prev: $(cat $st/prev/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
dir() { case $1 in prev) echo $st/prev;; pool) echo $st/pool;; new) echo $st/bin;; esac; }
for i in 1 2; do
  for v in prev pool new; do
    r ${v}_small_all_to_all_z1_$i 60 "${mp[@]}" -np 2 $(dir $v)/atomr bench coll all_to_all -b 8 -e 64K -f 8 -n 2000 -w 100 --many 0 -z 1
  done
done
r new_small_all_reduce_z1 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 64K -f 8 -n 2000 -w 100 --many 0 -z 1
grep -E "^rc=[1-9]" $log
grep -E "^=== |^ +8 +2 |stages" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
