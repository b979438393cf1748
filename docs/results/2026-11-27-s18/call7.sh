#!/usr/bin/env bash
# Session 18, call 7 (nvidia-h200-x2): call 5's low cells again, old (5cd3b64) against new
# (4b1beee) taking turns: all_to_all and reduce_scatter from 16 MiB (all_to_all 16 MiB was 0.526
# of raw once in call 5), and the small reduce_scatter and all_gather rows back to back.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for v in old new; do
    if [[ $v == old ]]; then A=$st/old/atomr; else A=$st/bin/atomr; fi
    r ${v}_large_all_to_all_$i 60 "${mp[@]}" -np 2 $A bench coll all_to_all -b 16M -e 1G -f 4 -n 50 -w 5 --many 0
    r ${v}_large_reduce_scatter_$i 60 "${mp[@]}" -np 2 $A bench coll reduce_scatter -b 16M -e 1G -f 4 -n 50 -w 5 --many 0
    r ${v}_small_reduce_scatter_$i 60 "${mp[@]}" -np 2 $A bench coll reduce_scatter -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${v}_small_all_gather_$i 60 "${mp[@]}" -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  done
done
grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
grep -E "^=== .*large|^ +[0-9]{8,} " $log | sed -E 's/mpirun .* -np 2 //' | awk '/^===/{n=$2; next} {print n, $1, $NF}'
