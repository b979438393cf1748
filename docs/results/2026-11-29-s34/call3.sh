#!/usr/bin/env bash
# Session 34, call 3 (nvidia-h200: one H200; the two-GPU machine not lent), build 22d3edb (call
# 2's): sampling profiles of 1000 x 2 KiB at 1 rank, --prepared and --group, long enough for
# tests/probes/pc_sampler.c (its per-thread CPU-time timers fire on the kernel's ticks, a few
# hundred samples a second per thread at most: call 2's 3000 rounds gave 427 samples in all).
CALL=c3 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin
for how in prepared group; do
  rounds=100000; [[ $how == group ]] && rounds=60000
  r profiled_$how 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_$how -np 1 $b/many_small_probe $rounds 1000 2048 --gpu --$how
  python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_$how.raw $out/prof_$how.*.txt > $out/report_$how.txt 2>&1
  rm -f $out/prof_$how.*.txt
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=|many_small_probe:" $log
for how in prepared group; do grep -A45 "^== thread" $out/report_$how.txt | head -100 | cut -c1-160; done
