#!/usr/bin/env bash
# Session 32, call 4 (nvidia-h200: one H200; the two-GPU machine not lent), 50a71a3 (bulk calls
# handed to the progress thread, the idle thread emptying one spare a turn, and buffer_block's
# write requests on a line of their own) against a3c02d9 (the build of call 2, carried as
# .gpu-pack/old.tar.xz), taking turns: many_small_probe --gpu --group at 1 rank with bulk calls,
# and the new build with them off; bench coll --many 1000; then the GPU tests (launch/gpu-suite).
CALL=c4 CALL_BUDGET_S=170
source launch/gpu-call-env
old=/tmp/old; rm -rf $old; mkdir -p $old; tar xJf $root/.gpu-pack/old.tar.xz -C $old
echo "old: $(cat $old/.gpu-stage/COMMIT)" >> $out/machine.txt
b=$st/bin; ob=$old/.gpu-stage/bin; mkdir -p $out/json
for i in 1 2 3 4; do
  r new_b1_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r old_b1_$i 20 "${mp[@]}" -np 1 $ob/many_small_probe 300 1000 2048 --gpu --group
  r new_b0_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=0 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
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
