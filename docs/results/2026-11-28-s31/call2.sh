#!/usr/bin/env bash
# Session 31, call 2 (nvidia-h200-x2), f3d8bd0: packed batches as graphs on / off
# (ATOMR_COLL_PACK_GRAPHS=1/0) taking turns: the small all_reduce rows back to back and each
# waited for (whether the latency window's packs now vote), bench coll --many 1000 (the issue's
# row) and many_small_probe --gpu --group --gap (each call finds the engine idle); the caller's
# hand-over with host buffers (many_small_probe without --gpu); then the GPU tests
# (launch/gpu-suite).
CALL=c2 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for z in 0 1; do
  for g in 1 0; do
    r small_z${z}_g$g 30 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $b/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_z${z}_g$g.json
  done
done
for i in 1 2; do
  for g in 1 0; do
    r bench_g${g}_$i 40 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_g${g}_$i.json
    r gap_g${g}_$i 30 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
r host_group 30 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --group
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
suite 290
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|# engine over" $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
