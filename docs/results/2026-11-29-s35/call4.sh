#!/usr/bin/env bash
# Session 35, call 4 (nvidia-h200: one H200; the two-GPU machine not lent), build a5a584a (call
# 3's): sampling profiles of 1000 x 2 KiB prepared and submit_group calls at 1 rank (named on the
# build machine with the unstripped binaries of the same build: launch/pc-profile-report --subst),
# to see what the progress thread spends per bulk call.
CALL=c4 CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin
for how in prepared group; do
  rounds=100000; [[ $how == group ]] && rounds=50000
  r profiled_$how 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_$how -np 1 $b/many_small_probe $rounds 1000 2048 --gpu --$how
  python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_$how.raw $out/prof_$how.*.txt > /dev/null 2>&1
  rm -f $out/prof_$how.*.txt
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe: 1000" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
