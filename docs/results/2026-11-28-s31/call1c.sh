#!/usr/bin/env bash
# Session 31, call 1c (nvidia-h200, one GPU), 30f6d29: where each thread's CPU time goes
# (pc_sampler) in many_small_probe --gpu --group at 1 rank x 1 GPU, packed graphs on and off.
CALL=c1c CALL_BUDGET_S=100
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/prof
for g in 1 0; do
  r prof_g$g 40 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/g$g -np 1 $b/many_small_probe 1500 1000 2048 --gpu --group
done
(cd $out && tar czf prof.tar.gz prof && rm -rf prof)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|thread" $log | sed 's/mpirun.*-np [12] //' | cut -c1-220; tail -1 $log
