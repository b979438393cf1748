#!/usr/bin/env bash
# Session 36, call 8 (nvidia-h200-x2, the same lease), build 3f318b9: 1 rank x 2 GPUs' small rows
# (back to back and each waited for), then large all_reduce and all_gather rows at 2 ranks.
CALL=c8 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for z in 0 1; do
  r one_rank_two_gpus_z$z 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r large_$op 60 "${mp[@]}" -np 2 $b/atomr bench coll $op -b 16M -e 1G -f 4 -n 200 -w 20 --many 0 -J $out/json/large_$op.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; tail -1 $log
