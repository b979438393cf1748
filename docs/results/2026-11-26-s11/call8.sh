#!/usr/bin/env bash
# Session 11, call 8 (nvidia-h200-x2, the code of 66badd4; the same as call 7, again): every issue-12 row, with nccl-tests'
# programs at the same sizes in the same lease; the many-small row three times, bench p2p twice.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c8; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c8.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; nproc
  mpirun --version | head -1; nvidia-smi --query-gpu=uuid --format=csv; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  nt=$op; [[ $op == all_to_all ]] && nt=alltoall
  for z in 0 1; do
    r nt_small_${op}_z$z 60 "${mp[@]}" -np 2 $st/nt/${nt}_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z $z
    r small_${op}_z$z 60 "${mp[@]}" -np 2 $A bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
  r nt_large_$op 90 "${mp[@]}" -np 2 $st/nt/${nt}_perf -b 16M -e 1G -f 4 -n 50 -w 5
  r large_$op 90 "${mp[@]}" -np 2 $A bench coll $op -b 16M -e 1G -f 4 -n 50 -w 5 --many 0 -J $out/json/large_$op.json
done
for i in 1 2 3; do
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
  r many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000 -J $out/json/many_$i.json
done
for z in 0 1; do
  r g2_z$z 60 "${mp[@]}" -np 1 $A bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
r host 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host.json
r host_z1 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1.json
for i in 1 2; do r p2p_$i 90 $A bench p2p; done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
