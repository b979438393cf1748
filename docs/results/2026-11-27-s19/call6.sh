#!/usr/bin/env bash
# Session 19, call 6 (nvidia-h200-x2, the final engine: the kept pack pool, chunked frees,
# prefetching): the GPU tests
# (launch/gpu-suite, tests part), then every issue-12 row with nccl-tests' programs at the same
# sizes in the same lease (as session 18's call 5), with 1000 x 2 KiB also run by the previous
# engine's probe (prev: 1239355, before the prefetching), taking turns.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out/json"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nvidia-smi topo -m; nproc
  mpirun --version | head -1; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  ntn=$op; [[ $op == all_to_all ]] && ntn=alltoall
  for z in 0 1; do
    r nt_small_${op}_z$z 60 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
    r small_${op}_z$z 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
  r nt_large_$op 90 "${mp[@]}" -np 2 $nt/${ntn}_perf -b 16M -e 1G -f 4 -n 50 -w 5
  r large_$op 90 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0 -J $out/json/large_$op.json
done
for i in 1 2 3; do
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
  r many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many_$i.json
  r new_probe_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r prev_probe_$i 60 "${mp[@]}" -np 2 $st/prev/many_small_probe 300 1000 2048 --gpu
done
for z in 0 1; do r nt_g2_all_reduce_z$z 60 "${mp[@]}" -np 1 $nt/all_reduce_perf -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z; done
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r g2_${op}_z$z 60 "${mp[@]}" -np 1 $A bench coll $op -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/g2_${op}_z$z.json
  done
done
r host 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host.json
r host_z1 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1.json
for i in 1 2; do r p2p_$i 90 $A bench p2p; done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
grep -E "^=== (nt_m1000|many|new_probe|prev_probe)|many small|many_small_probe:|^ +2048 +512 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-220
