#!/usr/bin/env bash
# Session 23, call 6 (nvidia-h200-x2), at d322a89: the GPU tests (launch/gpu-suite, tests part);
# 1000 x 2 KiB in one submit_all call, old (f851b86) and new taking turns, with nccl-tests' group
# of 1000; the timeline of one such call (new, host and NCCL); the large rows of all_to_all (the
# one short of 0.99 at 64 MiB) and all_reduce with nccl-tests beside them; bench p2p.
# PART=suite runs the suite only, PART=rows the rest (two calls: each has 600 s at most).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6_${PART:-suite}; mkdir -p "$out/keep"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; mpirun --version | head -1; } > $out/machine.txt 2>&1
t0=$SECONDS
if [[ ${PART:-suite} == suite ]]; then
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
tail -4 $out/suite.txt; exit 0
fi
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for v in old new; do
    p=$([[ $v == old ]] && echo $st/bin/msp_old || echo $st/bin/many_small_probe)
    r ${v}_probe_gpu_$i 60 "${mp[@]}" -np 2 $p 300 1000 2048 --gpu
    r ${v}_probe_host_$i 60 "${mp[@]}" -np 2 $p 300 1000 2048
  done
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
for v in old new; do
  a=$([[ $v == old ]] && echo $st/bin/atomr_old || echo $st/bin/atomr)
  r ${v}_many_gpu 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  r ${v}_many_host 60 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
done
for b in host gpu; do
  flag=$([[ $b == host ]] && echo --host || true)
  r traced_$b 60 "${mp[@]}" -x ATOMR_TRACE=$out/keep/tr_$b -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce $flag -b 8 -e 8 -n 20 -w 5 --many 1000
  for k in 0 1; do echo "--- $b rank $k" >> $log; python3 $root/launch/trace-batches $out/keep/tr_$b.rank$k.json >> $log 2>&1; done
done
(cd $out/keep && tar czf ../traces.tar.gz . ) && rm -rf $out/keep
for i in 1 2; do
  r large_all_to_all_$i 120 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_to_all -b 16M -e 1G -f 4 -n 100 -w 10 --many 0
  r nt_large_alltoall_$i 120 "${mp[@]}" -np 2 $nt/alltoall_perf -b 16M -e 1G -f 4 -n 100 -w 10
done
r large_all_reduce 120 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 16M -e 1G -f 4 -n 100 -w 10 --many 0
r p2p 90 $st/bin/atomr bench p2p
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:" $log | grep -B1 "many_small_probe:" | grep -v "^--" | paste - - | sed -E 's/=== ([a-z_0-9]+):.*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/' | sort
grep -E "many small|^ +2048 +512" $log | cut -c1-230
sed -n '/^--- host rank 0/,/^=== large_all_to_all_1/p' $log | grep -vE "^#|^ +8 |^\[" | cut -c1-160
grep -E "^=== large|^=== nt_large|^ +(16777216|67108864|268435456|1073741824) " $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
sed -n '/=== p2p/,$p' $log | grep -vE "^#" | head -30
