#!/usr/bin/env bash
# Session 19, call 1 (nvidia-h200-x2): the final engine of session 18 (bb89fdb) on the GPU: the
# GPU tests (launch/gpu-suite, tests part); then old (5cd3b64) against new taking turns: the small
# rows back to back and -z 1 for every collective, 1000 x 2 KiB (probe and bench coll --many);
# then the host rows and bench p2p.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "new: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
    for z in 0 1; do
      for v in old new; do
        if [[ $v == old ]]; then d=$st/old; else d=$st/bin; fi
        r ${v}_small_${op}_z${z}_$i 60 "${mp[@]}" -np 2 $d/atomr bench coll $op -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
      done
    done
  done
done
for i in 1 2 3; do
  for v in old new; do
    if [[ $v == old ]]; then d=$st/old; else d=$st/bin; fi
    r ${v}_probe_$i 60 "${mp[@]}" -np 2 $d/many_small_probe 300 1000 2048 --gpu
    r ${v}_many_$i 60 "${mp[@]}" -np 2 $d/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
for i in 1 2; do
  r traced_$i 60 "${mp[@]}" -x ATOMR_TRACE=$out/many$i -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  for k in 0 1; do python3 launch/trace-batches $out/many$i.rank$k.json >> $log 2>&1; done
done
rm -f $out/*.json
for i in 1 2; do
  r host_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100
  r host_z1_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0
  r p2p_$i 90 $st/bin/atomr bench p2p
done
echo "all done in $((SECONDS-t0)) s" >> $log
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
sed -n '/=== traced_1/,/=== host_1/p' $log | grep -vE "^#|^ +8 " | cut -c1-200
grep -E "^=== |many_small_probe:|many small" $log | sed -E 's/mpirun .* -np 2 //' | grep -B1 -E "many_small_probe:|many small" | cut -c1-200
