#!/usr/bin/env bash
# Session 22, call 3 (nvidia-h200-x2), at 6b0863e (the shared-memory segment agreed by
# point-to-point messages on the parent communicator): world_collectives_test at 4 ranks five
# times (requests failing after 20 s), the GPU tests (launch/gpu-suite, tests part), then the
# host backend's rows on the GPU machine's CPUs, new and e46eb8a (atomr_old) taking turns.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c3; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; mpirun --version | head -1; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
t0=$SECONDS
for i in 1 2 3 4 5; do
  ATOMR_COLL_TIMEOUT_MS=20000 timeout 60 mpirun --bind-to none -np 4 -x LD_LIBRARY_PATH -x ATOMR_COLL_TIMEOUT_MS $st/bin/world_collectives_test > $out/np4_$i.log 2>&1
  echo "np4 run $i rc=$? $(grep -E 'PASSED|FAILED' $out/np4_$i.log | head -2 | tr '\n' ' ')" >> $out/np4.txt
done
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  r new_host_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host_$i.json
  r old_host_$i 90 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100
  r new_host_z1_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1_$i.json
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
cat $out/np4.txt; tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log
grep -E "^=== |many small|^ +8 +2 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-230
