#!/usr/bin/env bash
# Session 21, call 7 (nvidia-h200-x2), the session's engine (chains, plans agreed by host_allreduce):
# the GPU tests (launch/gpu-suite, tests part); then the small rows of every collective, back to
# back and -z 1, with nccl-tests at the same sizes and the session-20 engine (atomr_old, 32aa141)
# taking turns, two rounds; then 1000 x 2 KiB in one call, new and old, with nccl-tests' group of
# 1000. (The stage travels packed: .gpu-pack/stage.tar.xz, from launch/stage-gpu.)
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out/json"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; mpirun --version | head -1; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  ntn=$op; [[ $op == all_to_all ]] && ntn=alltoall
  for z in 0 1; do
    r nt_small_${op}_z$z 60 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 8 -e 1M -f 8 -n 1000 -w 100 -z $z
    for i in 1 2; do
      r new_small_${op}_z${z}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z${z}_$i.json
      r old_small_${op}_z${z}_$i 60 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z
    done
  done
done
for i in 1 2 3; do
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
  r new_many_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many_$i.json
  r old_many_$i 60 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log
grep -E "^=== (nt_m1000|new_many|old_many)|in one submit_all call|^ +2048 +512 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-200
