#!/usr/bin/env bash
# Session 32, call 1 (nvidia-h200, one GPU: the two-GPU machine not lent), bulk calls
# (ATOMR_COLL_BULK): many_small_probe --gpu --group at 1 rank, bulk calls on / off taking turns,
# back to back and with --gap; the same at 2 ranks on the one GPU over NCCL's socket transport
# (launch/own-nccl-host: the engine's costs per call at two ranks; the GPU times are the socket
# transport's); bench coll's many-small row at 1 rank; then the GPU tests (launch/gpu-suite).
CALL=c1 CALL_BUDGET_S=200
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2 3; do
  for k in 1 0; do
    r group_b${k}_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for i in 1 2; do
  for k in 1 0; do
    r gap_b${k}_$i 20 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
own=("${mp[@]}" -x NCCL_SOCKET_IFNAME=lo -x NCCL_IB_DISABLE=1)
for i in 1 2; do
  for k in 1 0; do
    r own2_b${k}_$i 40 "${own[@]}" -x ATOMR_COLL_BULK=$k -np 2 $root/launch/own-nccl-host $b/many_small_probe 200 1000 2048 --gpu --group
  done
done
for k in 1 0; do
  r many_b$k 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b$k.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
suite 330
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|# engine over" $log | sed 's/mpirun.*-np [12] //' | cut -c1-300; tail -1 $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
