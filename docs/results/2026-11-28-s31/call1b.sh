#!/usr/bin/env bash
# Session 31, call 1b (nvidia-h200, one GPU: the two-GPU machine was not lent), 30f6d29:
# gpu_world_test at 1 rank; at 1 rank x 1 GPU, packed batches as graphs on / off
# (ATOMR_COLL_PACK_GRAPHS=1/0) taking turns, many_small_probe --gpu --group, back to back and
# with --gap; packed_floor_probe at 1 rank.
CALL=c1b CALL_BUDGET_S=150
source launch/gpu-call-env
b=$st/bin
r gwt_np1 100 "${mp[@]}" -np 1 $b/gpu_world_test
for i in 1 2; do
  for g in 1 0; do
    r group_g${g}_$i 20 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
    r gap_g${g}_$i 20 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
r floor 60 "${mp[@]}" -np 1 $b/packed_floor_probe 100 1000 2048
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|PASSED|FAILED|^(mode|group|pack|graph|nccl_host)" $log | sed 's/mpirun.*-np [12] //' | cut -c1-220; tail -1 $log
