#!/usr/bin/env bash
# Session 37, call 5 (nvidia-h200-x2: two H200s), build e70cb08 (communicators retired at a world's end),
# nccl-tests 2.19.6 (MPI=1, sm_90) carried in .gpu-nt: every two-GPU row of issue 12 at this code,
# raw and atomr in the same run: 1000 x 2 KiB in one call at 2 ranks beside nccl-tests' group of
# 1000, the host backend on this machine's CPUs, bench p2p, the small rows (2 ranks; 1 rank x 2
# GPUs), the large rows; then the GPU tests with the time left (world programs at 2 ranks x 1 GPU).
CALL=c5 CALL_BUDGET_S=300
source launch/gpu-call-env
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
b=$st/bin; mkdir -p $out/json
nvidia-smi topo -m >> $out/machine.txt 2>&1
lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\))" >> $out/machine.txt
for i in 1 2 3; do
  r many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
r nt_group_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r nt_seq_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -n 1000 -w 20
for i in 1 2 3; do
  r host.many_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/host.many_$i.json
done
for i in 1 2; do
  r host.8b_$i 40 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0 -J $out/json/host.8b_$i.json
done
for i in 1 2; do r p2p_$i 40 $b/atomr bench p2p --max-bytes 64M; done
r p2p_1G 60 $b/atomr bench p2p
r small_all_reduce_z1 60 "${mp[@]}" -np 2 $b/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1 -J $out/json/small_all_reduce_z1.json
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r small_$op 60 "${mp[@]}" -np 2 $b/atomr bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -J $out/json/small_$op.json
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r large_$op 60 "${mp[@]}" -np 2 $b/atomr bench coll $op -b 16M -e 1G -f 4 -n 200 -w 20 --many 0 -J $out/json/large_$op.json
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "rows done ${SECONDS}s" >> $log
suite $(( 570 - SECONDS ))
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -1 $out/suite.txt
grep -E "gpu_world.*test" $out/suite.txt | cut -c1-60
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small|Avg bus|^ +2048 " $log | sed 's/mpirun.*-np [12] //' | cut -c1-420; tail -1 $log
