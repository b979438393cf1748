#!/usr/bin/env bash
# Session 32, call 4 (one H200 unless the two-GPU machine is lent), the final code: bulk calls
# on / off taking turns at 1 rank (many_small_probe --gpu --group, back to back and --gap; bench
# coll --many 1000), then the GPU tests (launch/gpu-suite).
CALL=c4 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3; do
  for k in 1 0; do
    r group_b${k}_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for k in 1 0; do
  r gap_b$k 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  r many_b$k 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b$k.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
suite 330
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
