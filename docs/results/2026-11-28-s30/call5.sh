#!/usr/bin/env bash
# Session 30, call 5 (nvidia-h200-x2), d65c854: where 1000 x 2 KiB all_reduces in one
# submit_group call spend their time now: many_small_probe --gpu --group with the request
# timeline (the last 4000 requests: four calls), summarised batch by batch (launch/trace-batches),
# and without it; the same with ATOMR_COLL_CALL_BATCH=1024 (one batch a call) and 128.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
p=$st/bin/many_small_probe
r traced 40 "${mp[@]}" -x ATOMR_TRACE=$out/tr/many -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 1000 2048 --gpu --group
for k in 0 1; do echo "--- many rank $k" >> $log; python3 launch/trace-batches $out/tr/many.rank$k.json >> $log 2>&1; done
for i in 1 2 3; do
  for b in 256 1024 128; do
    r batch${b}_$i 30 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=$b -np 2 $p 300 1000 2048 --gpu --group
  done
done
r traced1024 40 "${mp[@]}" -x ATOMR_COLL_CALL_BATCH=1024 -x ATOMR_TRACE=$out/tr/many1024 -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 1000 2048 --gpu --group
for k in 0 1; do echo "--- many1024 rank $k" >> $log; python3 launch/trace-batches $out/tr/many1024.rank$k.json >> $log 2>&1; done
echo "total ${SECONDS}s" >> $log
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
grep -E "^rc=[1-9]" $log; grep -vE "^rank [01] thread" $log | cut -c1-250; tail -1 $log
