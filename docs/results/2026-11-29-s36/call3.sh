#!/usr/bin/env bash
# Session 36, call 3 (nvidia-h200: one H200; the two-GPU machine not lent), build 7879aff (the
# session's last code), with 1aab9ab's many_small_probe and atomr staged as *.v0: the GPU tests,
# then 1000 x 2 KiB at 1 rank taking turns (submit_group with the call cache on and off, and the
# previous build; prepared, new and previous), and bench coll --many 1000 likewise.
CALL=c3 CALL_BUDGET_S=520
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
suite 300
for i in 1 2 3 4; do
  r group.v0_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.v0 300 1000 2048 --gpu --group
  r group_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r group.off_$i 15 "${mp[@]}" -x ATOMR_COLL_GROUP_CACHE=0 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r prepared.v0_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.v0 300 1000 2048 --gpu --prepared
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
done
for i in 1 2; do
  r many.v0_$i 40 "${mp[@]}" -np 1 $b/atomr.v0 bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many.v0_$i.json
  r many_$i 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
  r many.off_$i 40 "${mp[@]}" -x ATOMR_COLL_GROUP_CACHE=0 -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many.off_$i.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
