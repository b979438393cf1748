#!/usr/bin/env bash
# Session 8, call 7: the completion waiter, cudaEventSynchronize (ATOMR_WAITER_POLL=0, default)
# against polling cudaEventQuery (1), alternating: bench device and bench p2p.
set -uo pipefail
root=$PWD; s1=$root/.gpu-s1; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$s1/lib
A=$s1/bin/atomr_poll
log=$out/c7.log
for i in 1 2; do
  for p in 0 1; do
    echo "=== device_poll${p}_$i: ATOMR_WAITER_POLL=$p atomr bench device" >> $log
    ATOMR_WAITER_POLL=$p timeout 60 $A bench device >> $log 2>&1
    echo "=== p2p_poll${p}_$i: ATOMR_WAITER_POLL=$p atomr bench p2p --max-bytes 64M" >> $log
    ATOMR_WAITER_POLL=$p timeout 60 $A bench p2p --max-bytes 64M >> $log 2>&1
  done
done
cat $log
