#!/usr/bin/env bash
# Session 21, call 9 (nvidia-h200-x2): the cells of call 8 under 0.97 of raw (reduce_scatter 16 MiB,
# all_to_all 64 MiB) again with four times the iterations, twice, beside nccl-tests; and broadcast
# -z 1, new against old, three rounds (its atomr column was higher with the new engine in calls
# 4, 5 and 7, within the spread of raw).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c9.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for op in reduce_scatter all_to_all; do
    ntn=$op; [[ $op == all_to_all ]] && ntn=alltoall
    r nt_large_${op}_$i 90 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 16M -e 64M -f 4 -n 200 -w 20
    r large_${op}_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 16M -e 64M -f 4 -n 200 -w 20 --many 0
  done
done
for i in 1 2 3; do
  for e in new old; do
    r ${e}_broadcast_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _old) bench coll broadcast -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^=== (nt_)?large|^ +(16777216|67108864) " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-200
