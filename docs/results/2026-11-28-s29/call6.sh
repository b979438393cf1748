#!/usr/bin/env bash
# Session 29, call 6 (nvidia-h200-x2), e38d19a: every row of issue 12 item 2 (the small rows of
# every collective at 2 ranks x 1 GPU, -z 0 and 1; 1 rank x 2 GPUs; the large rows with -n 50;
# NCCL's and the host's many small; the host's 8 B; bench p2p; startup), nccl-tests beside them.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 40 "${mp[@]}" -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 40 "${mp[@]}" -np 1 $a bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r large_$op 60 "${mp[@]}" -np 2 $a bench coll $op -b 16M -e 1G -f 4 -n 50 -w 10 --many 0 -J $out/json/large_$op.json
done
for i in 1 2 3; do
  r many_gpu_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_gpu_$i.json
  r many_host_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_host_$i.json
  r host_8b_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0
  r p2p_$i 40 $a bench p2p --max-bytes 64M
done
r nt_small 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 8 -e 1M -f 8 -n 1000 -w 100
r nt_m1000 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2; do
  r init_launch_$i 40 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "many small|# startup|^ +67108864|^ +16777216" $log | cut -c1-330; tail -1 $log
