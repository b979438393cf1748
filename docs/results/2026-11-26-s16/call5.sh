#!/usr/bin/env bash
# Session 16, call 5 (nvidia-h200-x2): the vote by point-to-point recursive doubling (host_allreduce). The world tests
# (2 ranks, 1 rank), the failure tests, then the small rows of every collective back to back and
# waited for, nccl-tests at the same sizes, and 1000 concurrent all_reduces.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out/json"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR)
A=$st/bin/atomr
log=$out/c5.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
r world2 150 "${mp[@]}" -np 2 $st/bin/gpu_world_test
r world1 150 "${mp[@]}" -np 1 $st/bin/gpu_world_test --gtest_filter='WorldGraphs.*:Collectives.AllReduceF32:Collectives.AllToAll'
r failures2 90 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  ntn=$op; [[ $op == all_to_all ]] && ntn=alltoall
  for z in 0 1; do
    r nt_small_${op}_z$z 60 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
    r small_${op}_z$z 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
r nographs_all_gather_z0 60 "${mp[@]}" -x ATOMR_NCCL_GRAPHS=0 -np 2 $A bench coll all_gather -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0 -J $out/json/nographs_ag_z0.json
for i in 1 2; do
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
  r many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many_$i.json
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]|FAILED|PASSED" $log; python3 $root/.gpu-tools/ab_table.py $log
