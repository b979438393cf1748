#!/usr/bin/env bash
# Session 34, call 1 (nvidia-h200: one H200; the two-GPU machine not lent), build 48fe2dd (ecd7db5 and
# the probe printing agreements per call): the GPU tests at
# ecd7db5 (bulk calls agreed on in runs of up to 1024 entries; cluster::all_reduce_spec), among
# them gpu_world_test at 2 ranks over NCCL's socket transport (launch/own-nccl-host), where the
# runs' later bulk calls take the agreed cuts; then 1000 x 2 KiB at 1 rank (many_small_probe
# --gpu --group with specs by all_reduce_spec and braced, --prepared; bench coll --many 1000);
# then at 2 ranks on the one GPU over sockets, this build against 2fcb890's probe (one exchange
# per bulk call): socket-transport times, for direction only (the probe prints agreements per call).
CALL=c1 CALL_BUDGET_S=520
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
suite 300
for i in 1 2; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r braced_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group --braced
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
own=("${mp[@]}" -x NCCL_SOCKET_IFNAME=lo -np 2 launch/own-nccl-host)
for i in 1 2; do
  r sockets_runs_$i 40 "${own[@]}" $b/many_small_probe 100 1000 2048 --gpu --group
  r sockets_per_bulk_$i 40 "${own[@]}" $b/many_small_probe_2fcb890 100 1000 2048 --gpu --group
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -3 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
