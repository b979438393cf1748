#!/usr/bin/env bash
# Session 31, call 1 (nvidia-h200-x2), e537418: the floor for 1000 x 2 KiB all_reduces at 2 ranks
# (packed_floor_probe: one NCCL group, packed batches with tables uploaded or as kernel
# parameters, pool or fixed pack buffers, each batch as a CUDA graph); many_small_probe taking
# turns: "new" (e537418: tables as kernel parameters, packed batches replayed as graphs), "par"
# (the same with ATOMR_COLL_PACK_GRAPHS=0: the tables alone) and "old" (8712599); one traced run
# each; then the GPU tests.
CALL=c1 CALL_BUDGET_S=330
source launch/gpu-call-env
r floor 60 "${mp[@]}" -np 2 $st/bin/packed_floor_probe 100 1000 2048
pick() { p=$st/bin/many_small_probe; g=1; [[ $1 == old ]] && p=$st/bin/many_small_probe_old; [[ $1 == par ]] && g=0; }
for i in 1 2 3; do
  for v in new par old; do
    pick $v
    r ${v}_group_$i 20 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $p 300 1000 2048 --gpu --group
    r ${v}_all_$i 20 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -np 2 $p 300 1000 2048 --gpu
  done
done
mkdir -p $out/tr
for v in new par old; do
  pick $v
  r ${v}_traced 30 "${mp[@]}" -x ATOMR_COLL_PACK_GRAPHS=$g -x ATOMR_TRACE=$out/tr/$v -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 1000 2048 --gpu --group
done
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
t0=$SECONDS
timeout 280 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|packed_floor|^(mode|group|pack|graph|nccl_host)|packed NCCL|on the GPU" $log | sed 's/mpirun.*-np 2 //' | cut -c1-260; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
