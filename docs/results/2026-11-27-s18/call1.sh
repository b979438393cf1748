#!/usr/bin/env bash
# Session 18, call 1 (nvidia-h200-x2): the done mark (one store tells every waiter of a finished
# run; futures are fulfilled after, off the next batch's path) against the engine before it
# (5cd3b64, staged as .gpu-stage/old/), taking turns: 1000 x 2 KiB all_reduces (bench coll
# --many and many_small_probe), the small all_reduce rows, the host backend's 8 B and many small; nccl-tests' group of 1000 in the same
# lease; then the GPU tests (launch/gpu-suite, tests part) on the new build.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  for v in old new; do
    if [[ $v == old ]]; then A=$st/old/atomr; P=$st/old/many_small_probe; else A=$st/bin/atomr; P=$st/bin/many_small_probe; fi
    r ${v}_many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000
    r ${v}_probe_$i 60 "${mp[@]}" -np 2 $P 300 1000 2048 --gpu
  done
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
for i in 1 2; do
  for v in old new; do
    if [[ $v == old ]]; then A=$st/old/atomr; else A=$st/bin/atomr; fi
    for z in 0 1; do
      r ${v}_small_ar_z${z}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
    done
    r ${v}_host_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 500 --many 1000
  done
done
echo "rows done in $((SECONDS-t0)) s" >> $log
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log
grep -E "^=== |many small|many_small_probe|^ +2048 +512 " $log | cut -c1-230
python3 $root/.gpu-tools/ab_table.py $log
