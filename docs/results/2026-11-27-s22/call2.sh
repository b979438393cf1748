#!/usr/bin/env bash
# Session 22, call 2 (nvidia-h200-x2): world_collectives_test at 4 ranks (host backend), which hung
# in call 1's suite in AllReducesGoThroughSharedMemoryOnOneNode; the test now asks for the host
# names before making its world. Five runs, requests failing after 20 s; stacks if one hangs.
set -uo pipefail
st=$PWD/.gpu-slim; out=$OUT/c2; mkdir -p $out
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib ATOMR_COLL_TIMEOUT_MS=20000
which gdb > $out/gdb.txt 2>&1
for i in 1 2 3 4 5; do
  log=$out/np4_$i.log
  if [[ $i -ge 4 ]]; then export ATOMR_LOG=debug; f=--gtest_filter=*SharedMemory*; else f=; fi
  timeout 60 mpirun --bind-to none -np 4 -x LD_LIBRARY_PATH -x ATOMR_COLL_TIMEOUT_MS -x ATOMR_LOG $st/bin/world_collectives_test $f > $log 2>&1 &
  pid=$!
  for t in $(seq 1 45); do sleep 1; kill -0 $pid 2>/dev/null || break; done
  if kill -0 $pid 2>/dev/null; then
    echo "run $i: hung; stacks" >> $out/summary.txt
    for p in $(pgrep -f "bin/world_collectives_test"); do
      gdb -p $p -batch -ex "thread apply all bt" > $out/stack_${i}_$p.txt 2>&1 || cat /proc/$p/task/*/stack > $out/stack_${i}_$p.txt 2>&1
    done
  fi
  wait $pid; echo "run $i rc=$?" >> $out/summary.txt
  grep -E "PASSED|FAILED|Failure" $log | head -5 >> $out/summary.txt
done
cat $out/summary.txt
