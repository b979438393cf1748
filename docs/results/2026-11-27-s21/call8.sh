#!/usr/bin/env bash
# Session 21, call 8 (nvidia-h200-x2), the session's engine: from 16 MiB (with nccl-tests), 1 rank
# x 2 GPUs (chains replay there too; with nccl-tests -g 2), the host backend.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out/json"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  ntn=$op; [[ $op == all_to_all ]] && ntn=alltoall
  r nt_large_$op 90 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 16M -e 256M -f 4 -n 50 -w 5
  r large_$op 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 16M -e 256M -f 4 -n 50 -w 5 --many 0 -J $out/json/large_$op.json
done
for z in 0 1; do r nt_g2_all_reduce_z$z 60 "${mp[@]}" -np 1 $nt/all_reduce_perf -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 -z $z; done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r g2_${op}_z$z 60 "${mp[@]}" -np 1 $st/bin/atomr bench coll $op -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_${op}_z$z.json
  done
done
r host 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host.json
r host_z1 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1.json
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log
grep -E "^=== |^ +(16777216|67108864|268435456) " $log | sed -E "s/mpirun .* -np [12] //" | cut -c1-200 | head -40
