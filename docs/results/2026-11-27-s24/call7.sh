#!/usr/bin/env bash
# Session 24, call 7 (nvidia-h200-x2), HEAD's atomr (c8691cf, engine of 052b85e): every row of
# issue 12 item 2 once more: the small rows of every collective (2 ranks x 1 GPU, -z 0 and 1),
# the small all_reduce rows at 1 rank x 2 GPUs, the large rows, the host backend's 8 B and many
# small, NCCL's many small, bench p2p.
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c7; mkdir -p "$out/json"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/HEAD_COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr_head
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 90 "${mp[@]}" -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 90 $a bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z
done
for op in all_reduce all_to_all; do
  r large_$op 120 "${mp[@]}" -np 2 $a bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0
done
for i in 1 2; do
  r host_8b_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0
  r many_gpu_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  r many_host_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
  r p2p_$i 60 $a bench p2p --max-bytes 64M
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; tail -1 $log
