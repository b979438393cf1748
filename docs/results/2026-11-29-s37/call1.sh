#!/usr/bin/env bash
# Session 37, call 1 (nvidia-h200: one H200, 16 CPUs; the two-GPU machine not lent), build 7ae6171
# (code of d082208, the last code): the host backend's rows on the GPU machine's CPUs first
# (2 ranks, --host: 1000 x 2 KiB in one call, and 8 B waited for), then the GPU tests with the split
# world test programs (gpu_world_test, gpu_world_calls_test) timed at 1 rank and at 2 ranks over
# sockets (one GPU).
CALL=c1 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))" >> $out/machine.txt
for i in 1 2 3; do
  r host.many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/host.many_$i.json
done
for i in 1 2; do
  r host.8b_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0 -J $out/json/host.8b_$i.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "rows done ${SECONDS}s" >> $log
suite 330
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "world.*test" $out/suite.txt | cut -c1-200
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small|^ +8 |^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -2 $log
