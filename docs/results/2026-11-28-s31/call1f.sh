#!/usr/bin/env bash
# Session 31, call 1f (nvidia-h200, one GPU: the two-GPU machine still not lent), 3cc6c5e (the
# graph cache's sweep looks at one block of each graph a lookup): at 1 rank x 1 GPU, packed
# graphs on / off taking turns, many_small_probe --gpu --group; the small all_reduce rows with
# packed graphs on and off (whether anything packs there); then the GPU tests (launch/gpu-suite).
CALL=c1f CALL_BUDGET_S=120
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3; do
  for g in 1 0; do
    r group_g${g}_$i 20 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for g in 1 0; do
  r small_z0_g$g 30 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 1 $b/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 0 -J $out/json/small_z0_g$g.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
t0=$SECONDS
timeout 330 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# engine over" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
