#!/usr/bin/env bash
# Session 34, call 5 (nvidia-h200: one H200; the two-GPU machine not lent), build 39222b1 (graph
# keys by block address; call 4's build otherwise): the GPU tests (the graph tests replay packed
# batches and prepared calls by these keys, at 1 rank and at 2 over NCCL's socket transport);
# 1000 x 2 KiB at 1 rank taking turns (--prepared, --group; bench coll --many 1000).
CALL=c5 CALL_BUDGET_S=420
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
suite 300
for i in 1 2; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
