#!/usr/bin/env bash
# Session 27, call 2 (nvidia-h200-x2): startup, MPI_Init to the first all_reduce, taking turns:
# "new" (6ee184f: NCCL's kernels loaded by cluster::warm_nccl while the devices start, the pool's
# first memory mapped as the device starts), "nowarm" (the same with ATOMR_NCCL_WARM_UP=0) and
# "old" (call 1's binary, 1fd79db). 2 ranks x 1 GPU and 1 rank x 2 GPUs through atomr-launch; then
# the breakdown (ATOMR_LOG=debug, NCCL's Init timings) and gpu_warm_up_test.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c2; mkdir -p "$out/dbg"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc) uptime: $(cat /proc/uptime)"
  nvidia-smi --query-gpu=index,name,driver_version,persistence_mode --format=csv; } > $out/machine.txt 2>&1
log=$out/c2.log
one() {  # label binary warm [launch args...]
  local label=$1 bin=$2 warm=$3; shift 3
  echo "=== $label" >> $log
  ATOMR_NCCL_WARM_UP=$warm timeout 60 launch/atomr-launch "$@" -x LD_LIBRARY_PATH -x ATOMR_NCCL_WARM_UP $bin bench coll all_reduce ${G:-} -b 8 -e 8 -n 10 -w 2 --many 0 > $out/run.txt 2>&1
  echo "rc=$? (${SECONDS}s)" >> $log
  grep -E "MPI_Init to first|# startup" $out/run.txt | sed -e 's/.*MPI_Init to first all_reduce done: /total /' >> $log
}
for i in 1 2 3 4 5 6 7 8; do
  one new_$i $st/bin/atomr 1 -n 2
  one nowarm_$i $st/bin/atomr 0 -n 2
  one old_$i $ab/atomr_old 1 -n 2
done
for i in 1 2 3; do
  G="-g 2" one g2_new_$i $st/bin/atomr 1 -n 1 -g 2
  G="-g 2" one g2_nowarm_$i $st/bin/atomr 0 -n 1 -g 2
  G="-g 2" one g2_old_$i $ab/atomr_old 1 -n 1 -g 2
done
for w in 1 0; do
  echo "=== debug warm=$w" >> $log
  ATOMR_NCCL_WARM_UP=$w ATOMR_LOG=debug NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x ATOMR_NCCL_WARM_UP -x ATOMR_LOG -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 > $out/dbg/warm$w.txt 2>&1
  grep -E "Init timings|\] \[debug\]|# startup" $out/dbg/warm$w.txt | grep -v "CUDA graph" | cut -c1-300 >> $log
done
for np in 1 2; do
  echo "=== gpu_warm_up_test np $np" >> $log
  timeout 120 mpirun --bind-to none -x LD_LIBRARY_PATH -np $np $st/bin/gpu_warm_up_test >> $log 2>&1; echo "rc=$?" >> $log
done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf dbg.tar.gz dbg && rm -rf dbg run.txt)
grep -E "^rc=[1-9]|PASSED|FAILED|^total" $log
