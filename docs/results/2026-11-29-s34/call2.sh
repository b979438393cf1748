#!/usr/bin/env bash
# Session 34, call 2 (nvidia-h200: one H200; the two-GPU machine not lent), build 22d3edb (the
# SpecsMadeBySpecOf test counting references on a block no device holds; many_small_probe picking
# its GPU modulo the visible ones): the GPU tests again (call 1 failed that test on a reference
# the device's threads held for a moment); 1000 x 2 KiB at 1 rank taking turns (--prepared,
# --group, --group --braced); the request timeline of --prepared and --group
# (launch/trace-batches); a sampling profile of --prepared (tests/probes/pc_sampler.c, named with
# launch/pc-profile-report); at 2 ranks on the one GPU over NCCL's socket transport, --group
# (agreements per call: one per run of bulk calls).
CALL=c2 CALL_BUDGET_S=520
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json $out/trace
suite 300
for i in 1 2; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  r braced_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group --braced
done
for how in prepared group; do
  r traced_$how 30 "${mp[@]}" -x ATOMR_TRACE=$out/trace/$how -np 1 $b/many_small_probe 100 1000 2048 --gpu --$how
  python3 launch/trace-batches $out/trace/$how.rank0.json > $out/trace/$how.batches.txt 2>&1
done
r profiled_prepared 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof -np 1 $b/many_small_probe 3000 1000 2048 --gpu --prepared
python3 launch/pc-profile-report --threads --top 40 --raw-out $out/prof.raw $out/prof.*.txt > $out/report.txt 2>&1; rm -f $out/prof.*.txt
r sockets_group 60 "${mp[@]}" -x NCCL_SOCKET_IFNAME=lo -np 2 launch/own-nccl-host $b/many_small_probe 50 1000 2048 --gpu --group
(cd $out && tar czf trace.tar.gz trace && rm -rf trace json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -3 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
head -50 $out/report.txt
