#!/usr/bin/env bash
# Session 36, call 2 (nvidia-h200: one H200), build c3b0956, with many_small_probe.exp staged beside
# it: the same code with buffer_block aligned to 4096 bytes (its shared_ptr's control block then
# alone on a page: no prefetch by another core can take its line), for this comparison only. Does
# making 1000 specs (each buffer's count taken twice) stop costing a miss per buffer?
CALL=c2 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3; do
  r group_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r group.exp_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.exp 300 1000 2048 --gpu --group
  r prepared_$i 15 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r prepared.exp_$i 15 "${mp[@]}" -np 1 $b/many_small_probe.exp 300 1000 2048 --gpu --prepared
done
r profiled_group_exp 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_group_exp -np 1 $b/many_small_probe.exp 100000 1000 2048 --gpu --group
python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_group_exp.raw $out/prof_group_exp.*.txt > $out/report_group_exp_gpu.txt 2>&1
rm -f $out/prof_group_exp.*.txt
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
