#!/usr/bin/env bash
# Session 31, call 2 (nvidia-h200-x2), 30f6d29: gpu_world_test at 1 and 2 ranks (the finished
# requests test now with packed graphs off); packed batches as graphs on / off
# (ATOMR_COLL_PACK_GRAPHS=1/0) taking turns: bench coll --many 1000 (the row) and
# many_small_probe --gpu --group --gap (each call finds the engine idle); the caller's hand-over
# on the GPU machine with host buffers (many_small_probe without --gpu); where each thread's CPU
# time goes (pc_sampler) in many_small_probe --gpu --group.
CALL=c2 CALL_BUDGET_S=250
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json $out/prof
r gwt_np2 100 "${mp[@]}" -np 2 $b/gpu_world_test
r gwt_np1 100 "${mp[@]}" -np 1 $b/gpu_world_test
for i in 1 2 3; do
  for g in 1 0; do
    r bench_g${g}_$i 40 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_g${g}_$i.json
    r gap_g${g}_$i 30 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
r host_group 30 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --group
r prof_group 40 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/group -np 2 $b/many_small_probe 1000 1000 2048 --gpu --group
(cd $out && tar czf prof.tar.gz prof json && rm -rf prof json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|PASSED|FAILED|submit_|sequential|concurrent" $log | sed 's/mpirun.*-np [12] //' | cut -c1-220; tail -1 $log
