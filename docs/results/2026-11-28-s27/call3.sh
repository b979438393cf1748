#!/usr/bin/env bash
# Session 27, call 3 (nvidia-h200-x2): startup taking turns, "new" (395415a: the device's pool
# maps its first memory as the device starts) against "old" (call 1's binary, 1fd79db), 2 ranks x
# 1 GPU and 1 rank x 2 GPUs through atomr-launch; the world's creation broken down (ATOMR_LOG=debug,
# NCCL's Init timings); then the GPU tests (launch/gpu-suite).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c3; mkdir -p "$out/dbg"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc) uptime: $(cat /proc/uptime)"
  nvidia-smi --query-gpu=index,name,driver_version,persistence_mode --format=csv; } > $out/machine.txt 2>&1
log=$out/c3.log
one() {  # label binary [launch args...]
  local label=$1 bin=$2; shift 2
  echo "=== $label" >> $log
  timeout 60 launch/atomr-launch "$@" -x LD_LIBRARY_PATH $bin bench coll all_reduce ${G:-} -b 8 -e 8 -n 10 -w 2 --many 0 > $out/run.txt 2>&1
  echo "rc=$? (${SECONDS}s)" >> $log
  grep -E "MPI_Init to first|# startup" $out/run.txt | sed -e 's/.*MPI_Init to first all_reduce done: /total /' >> $log
}
for i in 1 2 3 4 5 6; do
  one new_$i $st/bin/atomr -n 2
  one old_$i $ab/atomr_old -n 2
done
for i in 1 2 3; do
  G="-g 2" one g2_new_$i $st/bin/atomr -n 1 -g 2
  G="-g 2" one g2_old_$i $ab/atomr_old -n 1 -g 2
done
echo "=== debug" >> $log
ATOMR_LOG=debug NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x ATOMR_LOG -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 > $out/dbg/debug.txt 2>&1
grep -E "Init timings|\] \[debug\]|# startup" $out/dbg/debug.txt | grep -v "CUDA graph" | cut -c1-300 >> $log
echo "init done ${SECONDS}s" >> $log
t0=$SECONDS
timeout 400 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite dbg && rm -rf suite dbg run.txt)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]|^total" $log; grep -E "^total|startup" $log | paste - - | awk '{print $2, $0}' | cut -c1-60 | head -0; tail -4 $out/suite.txt
