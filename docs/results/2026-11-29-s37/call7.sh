#!/usr/bin/env bash
# Session 37, call 7 (nvidia-h200-x2: two H200s), build d179698 (the WorldTeardown test measures
# after every rank has waited for its own communicators and they met): the test that failed in
# call 5's scalable-init run at 2 ranks, 4 times each way, then gpu_world_test whole at 2 ranks
# both ways; then two more runs of the 1000 x 2 KiB row (call 5's three spread 260-515 us).
CALL=c7 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
sc=(-x ATOMR_NCCL_SCALABLE_RANKS=1 -x ATOMR_NCCL_RANKS_PER_ID=1)
for i in 1 2 3 4; do
  r teardown_np2_$i 40 "${mp[@]}" -np 2 $b/gpu_world_test --gtest_filter='WorldTeardown.*'
  r teardown_scalable_np2_$i 40 "${mp[@]}" "${sc[@]}" -np 2 $b/gpu_world_test --gtest_filter='WorldTeardown.*'
done
r gpu_world_test.np2 90 "${mp[@]}" -np 2 $b/gpu_world_test
r gpu_world_test_scalable.np2 90 "${mp[@]}" "${sc[@]}" -x ATOMR_LOG=debug -np 2 $b/gpu_world_test
grep -c "ncclCommInitRankScalable with 2 unique ids" $log >> $log
for i in 4 5; do
  r many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^=== |^rc=|FAILED|six worlds|tests ran|PASSED|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400
