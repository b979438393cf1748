#!/usr/bin/env bash
# Session 30, call 9 (nvidia-h200-x2), abecb6d (the session's last code): the GPU tests
# (launch/gpu-suite), then the small rows of every collective (-z 0 and 1), 1 rank x 2 GPUs, and
# the large rows of all_reduce and all_to_all with -n 200.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c9.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 520 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
t0=$SECONDS
timeout 320 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 1 0; do
    r small_${op}_z$z 30 "${mp[@]}" -np 2 $a bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
for z in 0 1; do
  r one_rank_two_gpus_z$z 30 "${mp[@]}" -np 1 $a bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z$z.json
done
for op in all_reduce all_to_all; do
  r large_$op 40 "${mp[@]}" -np 2 $a bench coll $op -b 16M -e 1G -f 4 -n 200 -w 20 --many 0 -J $out/json/large_$op.json
done
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "rc=[1-9]" $out/suite.txt $log; tail -2 $out/suite.txt; grep -E "# stages|# engine" $log | cut -c1-200; tail -1 $log
