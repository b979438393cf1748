#!/usr/bin/env bash
# Session 22, call 4 (nvidia-h200-x2), 6b0863e: SplitByParity alone at 4 ranks (hung 4 of 5 runs
# of the whole program in call 3), six runs with the shared-memory all_reduce on (debug log) and
# six with it off (ATOMR_HOST_SHM_BYTES=0); each run given 20 s.
set -uo pipefail
st=$PWD/.gpu-slim; out=$OUT/c4; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib ATOMR_COLL_TIMEOUT_MS=15000
for mode in on off; do
  for i in 1 2 3 4 5 6; do
    if [[ $mode == on ]]; then export ATOMR_LOG=debug ATOMR_HOST_SHM_BYTES=4194304; else export ATOMR_LOG=info ATOMR_HOST_SHM_BYTES=0; fi
    timeout 20 mpirun --bind-to none -np 4 -x LD_LIBRARY_PATH -x ATOMR_COLL_TIMEOUT_MS -x ATOMR_LOG -x ATOMR_HOST_SHM_BYTES \
      $st/bin/world_collectives_test --gtest_filter=*SplitByParity* > $out/${mode}_$i.log 2>&1
    echo "$mode run $i rc=$?" >> $out/all.txt
  done
done
cat $out/all.txt
for f in $out/on_*.log; do echo "== $f"; grep -v "^\[ *OK\|^\[=\|^\[-" $f | tail -12 | cut -c1-220; done 2>&1 | head -120
