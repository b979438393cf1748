#!/usr/bin/env bash
# Session 8, call 3: sealed completion events (new) against HEAD 28a432c (old), alternating.
set -uo pipefail
root=$PWD; stage=$root/.gpu-s1; out=$OUT/ab1; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$stage/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/ab1.log
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    for b in old new; do
      A=$stage/bin/atomr; [[ $b == old ]] && A=$stage/bin/atomr_old
      echo "=== small_${op}_z${z}_$b: mpirun -np 2 atomr bench coll $op -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z" >> $log
      timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z${z}_$b.json >> $log 2>&1
    done
  done
  for b in old new; do
    A=$stage/bin/atomr; [[ $b == old ]] && A=$stage/bin/atomr_old
    echo "=== large_${op}_$b: mpirun -np 2 atomr bench coll $op -b 16M -e 256M -f 4 -n 20 -w 5 --many 0" >> $log
    timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 256M -f 4 -n 20 -w 5 --many 0 -J $out/json/large_${op}_$b.json >> $log 2>&1
  done
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^===|^ +[0-9]+ +[0-9]+ " $log | awk '/^===/{print $2; next} {printf "   %10s  atomr %8s  raw %8s  ratio %s\n", $1, $6, $14, $NF}'
