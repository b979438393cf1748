#!/usr/bin/env bash
# Session 21, call 10 (nvidia-h200-x2): broadcast -z 1 with the order swapped (old first, then new,
# three rounds; calls 4, 5, 7 and 9 always ran new first): an order effect, or the engine?
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c10; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c10.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for e in old new; do
    r ${e}_broadcast_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr$([[ $e == new ]] || echo _old) bench coll broadcast -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^===|^ +8 +2 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-160
