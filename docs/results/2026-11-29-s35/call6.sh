#!/usr/bin/env bash
# Session 35, call 6 (nvidia-h200: one H200; the two-GPU machine not lent), build c36d011
# (prepared calls keep their packed batches' graph keys; bulk entries not numbered one by one),
# with many_small_probe of a5a584a (call 3's) and 9260113 (call 5's new build) beside it: the GPU
# tests; 1000 x 2 KiB at 1 rank, prepared and submit_group, the three taking turns; bench coll
# --many 1000; a sampling profile of the new prepared calls.
CALL=c6 CALL_BUDGET_S=360
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
suite 265
for i in 1 2 3; do
  for v in .a5a584a .9260113 ""; do
    r prepared${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --prepared
  done
  for v in .a5a584a .9260113 ""; do
    r group${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --group
  done
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
r profiled_prepared 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_prepared -np 1 $b/many_small_probe 100000 1000 2048 --gpu --prepared
python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_prepared.raw $out/prof_prepared.*.txt > $out/report_prepared_gpu.txt 2>&1
rm -f $out/prof_prepared.*.txt
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
