#!/usr/bin/env bash
# Session 8, call 4: GPU tests at 2aa6e67 (sealed events); large sizes and 1 rank x 2 GPUs, old (28a432c) and new alternating.
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c4; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
for i in 1 2; do
  for op in all_gather reduce_scatter all_to_all; do
    for b in old new; do
      A=$s1/bin/atomr; [[ $b == old ]] && A=$s1/bin/atomr_old
      echo "=== large_${op}_${b}_$i: mpirun -np 2 atomr bench coll $op -b 16M -e 64M -f 4 -n 50 -w 5 --many 0" >> $log
      timeout 60 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 64M -f 4 -n 50 -w 5 --many 0 -J $out/json/large_${op}_${b}_$i.json >> $log 2>&1
    done
  done
done
for z in 0 1; do
  for b in old new; do
    A=$s1/bin/atomr; [[ $b == old ]] && A=$s1/bin/atomr_old
    echo "=== g2_z${z}_$b: mpirun -np 1 atomr bench coll all_reduce -g 2 -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z" >> $log
    timeout 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z -J $out/json/g2_z${z}_$b.json >> $log 2>&1
  done
done
for b in old new; do
  A=$s1/bin/atomr; [[ $b == old ]] && A=$s1/bin/atomr_old
  echo "=== many_$b: mpirun -np 2 atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000" >> $log
  timeout 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many_$b.json >> $log 2>&1
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^===|^ +[0-9]+ +[0-9]+ |many|concurrent" $log | awk '/^===/{print $2; next} /^ +[0-9]/{printf "   %10s  atomr %8s  raw %8s  ratio %s\n", $1, $6, $14, $NF; next} {print}'
export LD_LIBRARY_PATH=$root/.gpu-stage/lib
ATOMR_SUITE_PART=tests timeout 330 launch/gpu-suite > "$out/suite.out" 2>&1
echo "suite rc=$?"
cp $OUT/summary.txt $out/suite_summary.txt 2>/dev/null
grep -E "rc=[1-9]|failures:|skipped" "$OUT/summary.txt" | head -20
