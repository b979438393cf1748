#!/usr/bin/env bash
# Session 35, call 2 (nvidia-h200: one H200; the two-GPU machine not lent), build b8d9630 with
# ab-caller-empties.diff (a switch for this comparison only): spare bulk calls emptied by the
# progress thread (ATOMR_AB_CALLER_EMPTIES=0, as committed) or by the caller that takes them
# (=1: the buffer references dropped on the thread that made the specs). Taking turns, 1 rank.
CALL=c2 CALL_BUDGET_S=230
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3 4; do
  for k in 0 1; do
    r group_k${k}_$i 15 "${mp[@]}" -x ATOMR_AB_CALLER_EMPTIES=$k -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for i in 1 2; do
  for k in 0 1; do
    r many_k${k}_$i 40 "${mp[@]}" -x ATOMR_AB_CALLER_EMPTIES=$k -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_k${k}_$i.json
  done
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
