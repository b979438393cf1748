#!/usr/bin/env bash
# Session 30, call 1 (nvidia-h200-x2), 38a439b: the graph votes through shared memory. The small
# rows of every collective at 2 ranks x 1 GPU waited for (-z 1), with ATOMR_COLL_VOTE_SHM=1 (the
# default) and =0 (the votes by MPI messages, as before) taking turns; back to back (-z 0) with
# the default; 1 rank x 2 GPUs; nccl-tests beside them.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for shm in 1 0; do
    r small_${op}_z1_shm$shm 40 "${mp[@]}" -x ATOMR_COLL_VOTE_SHM=$shm -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1 -J $out/json/small_${op}_z1_shm$shm.json
  done
done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  r small_${op}_z0 40 "${mp[@]}" -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 0 -J $out/json/small_${op}_z0.json
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 40 "${mp[@]}" -np 1 $a bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
r nt_small 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 8 -e 1M -f 8 -n 1000 -w 100
r nt_small_z1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "^=== |# stages|# engine" $log | cut -c1-250; tail -1 $log
