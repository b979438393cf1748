#!/usr/bin/env bash
# Session 9, call 7: 52d6552 (no second readiness look at issue, inline write tickets) against
# cd54954 ("prev"), alternating: many small, small all_reduce rows, 1 rank x 2 GPUs; then
# gpu_world_test at 2 ranks and at 1 rank x 2 GPUs.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ)" > $log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
bin() { [[ $1 == prev ]] && echo $st/bin/atomr_prev || echo $st/bin/atomr; }
for i in 1 2 3 4 5 6; do
  for b in prev new; do
    r many_${b}_$i 60 "${mp[@]}" -np 2 $(bin $b) bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
for i in 1 2 3; do
  for b in prev new; do
    for z in 0 1; do
      r small_z${z}_${b}_$i 60 "${mp[@]}" -np 2 $(bin $b) bench coll all_reduce -b 8 -e 4K -f 8 -n 3000 -w 100 --many 0 -z $z
    done
  done
done
for i in 1 2; do
  for b in prev new; do
    r g2_${b}_$i 60 "${mp[@]}" -np 1 $(bin $b) bench coll all_reduce -g 2 -b 8 -e 4K -f 8 -n 3000 -w 100 --many 0
  done
done
grep -E "^=== many|many small" $log | sed 's/: mpirun.*//' | cut -c1-330
grep -E "^===|^ +[0-9]+ +[0-9]+ " $log | awk '/^===/{n=$2; next} NF>=17 {printf "%-18s %10s atomr %8s raw %8s %+6.2f\n", n, $1, $6, $14, $6-$14}' | grep -v many
r gpu_world_test_np2 150 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r gpu_world_test_np1 150 "${mp[@]}" -np 1 $st/bin/gpu_world_test
grep -E "^=== gpu|PASSED|FAILED|^rc=" $log | tail -8
