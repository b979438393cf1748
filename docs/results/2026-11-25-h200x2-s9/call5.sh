#!/usr/bin/env bash
# Session 9, call 5 (final): cd54954 against call 2's binary (521b69b's engine; "old"),
# alternating: many small in one submit_all call; the final rows with nccl-tests' all_reduce and
# all_gather beside them; 1 rank x 2 GPUs; host backend; bench p2p; then the GPU tests.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c5.log
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ)" > $log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4 5 6; do
  for b in old new; do
    B=$A; [[ $b == old ]] && B=$st/bin/atomr_old
    r many_${b}_$i 60 "${mp[@]}" -np 2 $B bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r nt_m1000 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r many_traced 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/tr $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
echo "=== timeline of the last 3 submit_all runs, rank 0 then 1 (us from the first hand-off)" >> $log
python3 $st/an.py $out/tr.rank0.json 3 >> $log 2>&1; python3 $st/an.py $out/tr.rank1.json 3 >> $log 2>&1; rm -f $out/tr.rank*.json
for z in 0 1; do
  r nt_small_all_reduce_z$z 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
  r nt_small_all_gather_z$z 60 "${mp[@]}" -np 2 $st/nt/all_gather_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
  r large_$op 90 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0 -J $out/json/large_$op.json
done
for z in 0 1; do
  r g2_z$z 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
r host 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host.json
r host_z1 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1.json
r p2p 90 $A bench p2p
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "many small|hand-off|^rc=[1-9]|^ +2048 " $log | cut -c1-330
grep -E "^===|^ +[0-9]+ +[0-9]+ " $log | awk '/^===/{n=$2; next} NF>=17 {printf "%-18s %10s atomr %8s raw %8s %+6.2f %s\n", n, $1, $6, $14, $6-$14, $NF; next} /^ +[0-9]/ && NF>8 {printf "%-18s %10s nccl-tests %8s\n", n, $1, $6}'
grep -A14 "=== p2p" $log | tail -12
ATOMR_SUITE_PART=tests timeout 250 launch/gpu-suite > "$out/suite.out" 2>&1
echo "suite rc=$?"
cp $OUT/summary.txt $out/suite_summary.txt 2>/dev/null
grep -E "rc=[1-9]|failures:|skipped" "$OUT/summary.txt" | head -20
