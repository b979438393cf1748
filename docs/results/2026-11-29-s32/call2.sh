#!/usr/bin/env bash
# Session 32, call 2 (nvidia-h200, one GPU), the bulk calls with more to come handed to the
# progress thread: many_small_probe --gpu --group at 1 rank, bulk calls on / off taking turns,
# back to back and with --gap; bench coll's many-small row at 1 rank, bulk on / off; one
# profiled run (tests/probes/pc_sampler.c) of each.
CALL=c2 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json $out/prof
for i in 1 2 3 4; do
  for k in 1 0; do
    r group_b${k}_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for i in 1 2; do
  for k in 1 0; do
    r gap_b${k}_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
for i in 1 2; do
  for k in 1 0; do
    r many_b${k}_$i 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b${k}_$i.json
  done
done
for k in 1 0; do
  r prof_b$k 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/b$k -np 1 $b/many_small_probe 2000 1000 2048 --gpu --group
done
(cd $out && tar czf json.tar.gz json prof && rm -rf json prof)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
