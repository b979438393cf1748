#!/usr/bin/env bash
# Session 24, call 2 (nvidia-h200-x2), at 052b85e: request timelines of 1000 x 2 KiB NCCL
# all_reduces in one submit_all call, back to back and with the engine idle before each call
# (--gap), summarised by launch/trace-batches; then the GPU tests (launch/gpu-suite, tests part).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for mode in warm gap; do
  extra=(); [[ $mode == gap ]] && extra=(--gap)
  r trace_$mode 90 "${mp[@]}" -x ATOMR_TRACE=$out/tr/$mode -x ATOMR_TRACE_REQUESTS=4000 -np 2 $st/bin/many_small_probe 100 1000 2048 --gpu "${extra[@]}"
  for k in 0 1; do
    echo "--- $mode rank $k" >> $log
    python3 $root/launch/trace-batches $out/tr/$mode.rank$k.json >> $log 2>&1
  done
done
(cd $out && tar czf tr.tar.gz tr && rm -rf tr)
echo "traces done in $((SECONDS-t0)) s" >> $log
timeout 480 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
grep -E "^rc=[1-9]" $log
tail -5 $out/suite.txt
