#!/usr/bin/env bash
# Session 8, call 5: aaad9cd. (a) ATOMR_COLL_SEAL_BYTES 1M (default) / 0 (an event per request, as
# before) / 1G (shared always) at 16-64 MiB; (b) every collective's small rows at the default.
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c5; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_COLL_SEAL_BYTES)
A=$s1/bin/atomr
log=$out/c5.log
echo "commit: $(cat $root/.gpu-stage/COMMIT) date: $(date -u +%FT%TZ)" > $log
for i in 1 2; do
  for op in all_gather all_to_all reduce_scatter; do
    for sb in 1048576 0 1073741824; do
      echo "=== large_${op}_seal${sb}_$i: ATOMR_COLL_SEAL_BYTES=$sb mpirun -np 2 atomr bench coll $op -b 16M -e 64M -f 4 -n 50 -w 5 --many 0" >> $log
      ATOMR_COLL_SEAL_BYTES=$sb timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 64M -f 4 -n 50 -w 5 --many 0 -J $out/json/large_${op}_seal${sb}_$i.json >> $log 2>&1
    done
  done
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    echo "=== small_${op}_z${z}: mpirun -np 2 atomr bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z" >> $log
    timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z${z}.json >> $log 2>&1
  done
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^===|^ +[0-9]+ +[0-9]+ |^# stages" $log | awk '/^===/{print $2; next} /^ +[0-9]/{printf "   %10s  atomr %8s  raw %8s  +%6.2f ratio %s\n", $1, $6, $14, $6-$14, $NF; next} {print}'
