#!/usr/bin/env bash
# Session 28, call 8 (nvidia-h200-x2), HEAD (04f189f; the code CI passed at 4c72ce1): a sampling
# profile of many_small_probe --gpu (tests/probes/pc_sampler.c, named here with
# launch/pc-profile-report); the small rows of every collective again (-z 0 and 1, and 1 rank x 2
# GPUs); the large all_to_all three times and all_reduce once; 1000 x 2 KiB in one call three
# times with nccl-tests' group beside it.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r probe_profiled 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof -np 2 $st/bin/many_small_probe 3000 1000 2048 --gpu
python3 $root/launch/pc-profile-report --threads --top 40 --raw-out $out/prof.raw $out/prof.*.txt > $out/report.txt 2>&1; rm -f $out/prof.*.txt
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 40 "${mp[@]}" -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 40 "${mp[@]}" -np 1 $a bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
for i in 1 2 3; do
  r large_all_to_all_$i 60 "${mp[@]}" -np 2 $a bench coll all_to_all -b 16M -e 1G -f 4 -n 50 -w 10 --many 0 -J $out/json/large_all_to_all_$i.json
done
r large_all_reduce 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 16M -e 1G -f 4 -n 50 -w 10 --many 0 -J $out/json/large_all_reduce.json
r nt_alltoall 40 "${mp[@]}" -np 2 $nt/alltoall_perf -b 16M -e 1G -f 4 -n 50 -w 10
for i in 1 2 3; do
  r many_gpu_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
r nt_m1000 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "many small" $log | cut -c1-240; grep -E "^ +2048 " $log; tail -1 $log
