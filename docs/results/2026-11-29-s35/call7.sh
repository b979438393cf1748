#!/usr/bin/env bash
# Session 35, call 7 (nvidia-h200: one H200; the two-GPU machine not lent), build c36d011 (the
# session's last engine code) with a5a584a's atomr beside it: the small all_reduce rows at 1 rank,
# back to back and each waited for (-z 1), old and new taking turns, to see that the seal's marks
# under the spin lock cost single requests nothing.
CALL=c7 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2; do
  for z in 0 1; do
    for v in .a5a584a ""; do
      r small${v}_z${z}_$i 30 "${mp[@]}" -np 1 $b/atomr$v bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small${v}_z${z}_$i.json
    done
  done
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |^ +(8|64|512|4096|32768|262144) " $log | sed 's/mpirun.*-np [12] //' | cut -c1-200; tail -1 $log
