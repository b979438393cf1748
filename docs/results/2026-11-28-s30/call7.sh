#!/usr/bin/env bash
# Session 30, call 7 (nvidia-h200-x2): 1000 x 2 KiB all_reduces in one submit_group call, A =
# 7de3e4e (a packed batch's issue timed step by step under ATOMR_TRACE) against B = abecb6d (the
# same, with the requests carrying their buffers' pointers), taking turns: many_small_probe --gpu
# --group, five pairs untraced, then two traced each for the step-by-step times.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c7; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4 5; do
  for v in A B; do r ${v}_$i 30 "${mp[@]}" -np 2 $ab/probe_$v 300 1000 2048 --gpu --group; done
done
for i in 1 2; do
  for v in A B; do
    r ${v}_traced_$i 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/${v}_$i -x ATOMR_TRACE_REQUESTS=4000 -np 2 $ab/probe_$v 100 1000 2048 --gpu --group
  done
done
echo "total ${SECONDS}s" >> $log
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|packed NCCL" $log | sed 's/mpirun.*-np 2 //' | cut -c1-330; tail -1 $log
