#!/usr/bin/env bash
# Session 8, call 6: 3f89638 (final code). A/B against aaad9cd (back to back, small); every
# collective's small and large rows, 1 rank x 2 GPUs, many small; then the GPU tests.
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c6; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$s1/bin/atomr
log=$out/c6.log
echo "commit: $(cat $root/.gpu-stage/COMMIT) date: $(date -u +%FT%TZ)" > $log
for i in 1 2; do
  for op in all_reduce all_gather; do
    for b in aaad9cd new; do
      B=$A; [[ $b == aaad9cd ]] && B=$s1/bin/atomr_aaad9cd
      echo "=== ab_${op}_${b}_$i: mpirun -np 2 atomr bench coll $op -b 8 -e 4K -f 8 -n 3000 -w 100 --many 0" >> $log
      timeout 60 "${mp[@]}" -np 2 $B bench coll $op -b 8 -e 4K -f 8 -n 3000 -w 100 --many 0 >> $log 2>&1
    done
  done
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    echo "=== small_${op}_z${z}: mpirun -np 2 atomr bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z" >> $log
    timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z${z}.json >> $log 2>&1
  done
  echo "=== large_${op}: mpirun -np 2 atomr bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0" >> $log
  timeout 90 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0 -J $out/json/large_${op}.json >> $log 2>&1
done
for z in 0 1; do
  echo "=== g2_z${z}: mpirun -np 1 atomr bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z" >> $log
  timeout 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/g2_z${z}.json >> $log 2>&1
done
echo "=== many: mpirun -np 2 atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000" >> $log
timeout 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many.json >> $log 2>&1
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^===|^ +[0-9]+ +[0-9]+ |^# many" $log | awk '/^===/{print $2; next} /^ +[0-9]/{printf "   %10s  atomr %8s  raw %8s  +%6.2f ratio %s\n", $1, $6, $14, $6-$14, $NF; next} {print}'
export LD_LIBRARY_PATH=$root/.gpu-stage/lib
ATOMR_SUITE_PART=tests timeout 300 launch/gpu-suite > "$out/suite.out" 2>&1
echo "suite rc=$?"
cp $OUT/summary.txt $out/suite_summary.txt 2>/dev/null
grep -E "rc=[1-9]|failures:|skipped" "$OUT/summary.txt" | head -20
