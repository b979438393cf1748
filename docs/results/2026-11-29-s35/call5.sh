#!/usr/bin/env bash
# Session 35, call 5 (nvidia-h200: one H200; the two-GPU machine not lent), build 9260113 (a
# buffer's write mark under a spin_mutex) with many_small_probe of two earlier builds beside it:
# a5a584a (call 3's) and 2138b0f (the seal's marks take the event by reference). 1000 x 2 KiB at
# 1 rank, prepared and submit_group, the three taking turns; then a sampling profile of the new
# prepared calls, named here (libc) and on the build machine (our code).
CALL=c5 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3; do
  for v in .a5a584a .2138b0f ""; do
    r prepared${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --prepared
  done
  for v in .a5a584a .2138b0f ""; do
    r group${v}_$i 15 "${mp[@]}" -np 1 $b/many_small_probe$v 300 1000 2048 --gpu --group
  done
done
r profiled_prepared 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_prepared -np 1 $b/many_small_probe 100000 1000 2048 --gpu --prepared
python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_prepared.raw $out/prof_prepared.*.txt > $out/report_prepared_gpu.txt 2>&1
rm -f $out/prof_prepared.*.txt
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000" $log | sed 's/mpirun.*-np [12] //' | cut -c1-200; tail -1 $log
