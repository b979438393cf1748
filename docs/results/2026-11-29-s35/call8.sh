#!/usr/bin/env bash
# Session 35, call 8 (nvidia-h200: one H200; the two-GPU machine not lent), build dcf4ea3 (the
# write tickets' and the seal's locked lines asked for ahead, with intent to write) with
# c36d011's many_small_probe beside it: 1000 x 2 KiB at 1 rank, prepared and submit_group, in
# turn; bench coll --many 1000; a profile of the new prepared calls.
CALL=c8 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3; do
  for v in .c36d011 ""; do
    r prepared${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --prepared
  done
  for v in .c36d011 ""; do
    r group${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --group
  done
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
r profiled_prepared 40 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_prepared -np 1 $b/many_small_probe 100000 1000 2048 --gpu --prepared
python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_prepared.raw $out/prof_prepared.*.txt > $out/report_prepared_gpu.txt 2>&1
rm -f $out/prof_prepared.*.txt
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
