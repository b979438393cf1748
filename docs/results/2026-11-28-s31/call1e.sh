#!/usr/bin/env bash
# Session 31, call 1e (nvidia-h200, one GPU), 63a0141: what moves 1000 x 2 KiB at 1 rank x 1 GPU
# (no peer: the engine's own cost), many_small_probe --gpu --group, variants taking turns:
# base (batches of 256, packed graphs on), b1024g (ATOMR_COLL_CALL_BATCH=1024 with
# ATOMR_NCCL_GRAPH_BYTES=4 MiB: one graph for the call), b1024 (one batch, no graph:
# ATOMR_COLL_PACK_GRAPHS=0), noassist (ATOMR_WAIT_ASSIST=0: the caller does not poll).
CALL=c1e CALL_BUDGET_S=120
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3; do
  r base_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r b1024g_$i 20 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=1024 -x ATOMR_NCCL_GRAPH_BYTES=4194304 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r b1024_$i 20 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=1024 -x ATOMR_COLL_PACK_GRAPHS=0 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r noassist_$i 20 "${mp[@]}" -x ATOMR_WAIT_ASSIST=0 -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:" $log | sed 's/mpirun.*-np [12] //' | cut -c1-240; tail -1 $log
