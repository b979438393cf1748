#!/usr/bin/env bash
# Session 27, call 5 (nvidia-h200-x2), HEAD's binaries (395415a): the first all_reduce's slow mode
# (166-173 ms and 85 MiB more resident in 3 of 29 runs of call 4) and the ~200 ms of
# ncclCommInitRankConfig outside NCCL's own Init timings. 14 startups with ATOMR_LOG=debug and
# NCCL_DEBUG=INFO (subsystems INIT, PROFILE, ALLOC, ENV), each rank's log kept, then 14 with
# ATOMR_NCCL_GRAPHS=0 (no CUDA graph votes or captures).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out/dbg"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc) uptime: $(cat /proc/uptime)"
  nvidia-smi --query-gpu=index,name,driver_version,persistence_mode --format=csv; } > $out/machine.txt 2>&1
log=$out/c5.log
a=$st/bin/atomr
for i in $(seq 1 14); do
  echo "=== dbg_$i" >> $log
  ATOMR_LOG=debug NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,PROFILE,ALLOC,ENV NCCL_DEBUG_TIMESTAMP_LEVELS=INFO,WARN \
    NCCL_DEBUG_FILE=$out/dbg/nccl.$i.%p.txt timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x ATOMR_LOG -x NCCL_DEBUG \
    -x NCCL_DEBUG_SUBSYS -x NCCL_DEBUG_TIMESTAMP_LEVELS -x NCCL_DEBUG_FILE $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 > $out/dbg/atomr.$i.txt 2>&1
  echo "rc=$? (${SECONDS}s)" >> $log; grep -E "# startup" $out/dbg/atomr.$i.txt >> $log
done
for i in $(seq 1 14); do
  echo "=== nographs_$i" >> $log
  ATOMR_NCCL_GRAPHS=0 timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH -x ATOMR_NCCL_GRAPHS $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 > $out/run.txt 2>&1
  echo "rc=$? (${SECONDS}s)" >> $log; grep -E "# startup" $out/run.txt >> $log
done
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf dbg.tar.gz dbg && rm -rf dbg run.txt)
grep -E "^rc=[1-9]|^total" $log; grep "# startup" $log | sed 's/.*first all_reduce \([0-9.]*\).*RSS per rank \([0-9.]*\).*/\1 \2/' | tr '\n' ';'
