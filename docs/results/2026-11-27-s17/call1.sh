#!/usr/bin/env bash
# Session 17, call 1 (nvidia-h200-x2, 30ad6d9 = 21fb367's engine, never run on a GPU before): the
# GPU tests (launch/gpu-suite, tests part); the multi-GPU graph probe (one process, two GPUs);
# all_reduce at 1 rank x 2 GPUs and 2 ranks 8 B-1 MiB back to back and waited for; the 16 MiB
# rows that missed 0.97 in session 16; NCCL's own init timings.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; nproc; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
r probe 120 "${mp[@]}" -np 1 $st/bin/multi_gpu_graph_probe 2000
for z in 0 1; do
  r g2_z$z 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  r small_all_reduce_z$z 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  r nt_small_all_reduce_z$z 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
done
for op in all_to_all reduce_scatter; do
  r mid_$op 60 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 64M -f 4 -n 100 -w 10 --many 0
done
r init_timings 60 "${mp[@]}" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT -np 2 $A bench coll all_reduce -b 8 -e 8 -n 10 -w 1 --many 0
echo "all done in $((SECONDS-t0)) s" >> $log
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
grep -E "^(eager|per_device|fork_join)|probe:" $log
grep -iE "timings|Init COMPLETE|MPI_Init to" $log | head -20
