#!/usr/bin/env bash
# Session 32, call 3 (nvidia-h200-x2: two H200s), bulk calls at two ranks: the row
# (bench coll --many 1000, with its prepared-call column) with ATOMR_COLL_BULK=1 / =0 taking turns, many_small_probe --gpu
# --group back to back and with --gap, the host backend's many-small call, nccl-tests' group of
# 1000 (-m 1000) in the same lease, and the small all_reduce rows (bulk calls never touch them).
CALL=c3 CALL_BUDGET_S=300
source launch/gpu-call-env
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
b=$st/bin; mkdir -p $out/json
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do
  for k in 1 0; do
    r bench_b${k}_$i 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_b${k}_$i.json
  done
done
for i in 1 2; do
  for k in 1 0; do
    r group_b${k}_$i 30 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/many_small_probe 300 1000 2048 --gpu --group
    r prepared_$i$k 30 "${mp[@]}" -np 2 $b/many_small_probe 300 1000 2048 --gpu --prepared
    r gap_b${k}_$i 30 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  done
done
for k in 1 0; do
  r host_b$k 30 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/many_small_probe 300 1000 2048 --group
done
for z in 0 1; do
  r small_z$z 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_z$z.json
done
r nt_m1000_again 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small|^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
