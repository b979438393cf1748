#!/usr/bin/env bash
# Session 31, call 3 (nvidia-h200-x2), f3d8bd0 (the last code): the issue's row beside nccl-tests'
# one group of 1000 in the same lease: bench coll --many 1000 (packed graphs on, the default) and
# all_reduce_perf -b 2K -e 2K -m 1000, taking turns, twice.
CALL=c3 CALL_BUDGET_S=150
source launch/gpu-call-env
mkdir -p /tmp/ntst && tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp/ntst
nt=$(dirname "$(find /tmp/ntst -name all_reduce_perf | head -1)")
for i in 1 2; do
  r bench_$i 40 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  r nt_m1000_$i 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small|^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
