#!/usr/bin/env bash
# Session 22, call 1 (nvidia-h200-x2): the GPU tests (launch/gpu-suite, tests part) at 74b587b
# (the host backend's shared-memory all_reduce); then the host backend's rows on the GPU
# machine's CPUs, new and the twenty-first session's engine (atomr_old, e46eb8a) taking turns,
# three rounds: back to back with many small, and -z 1.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; mpirun --version | head -1; df -h /dev/shm; } > $out/machine.txt 2>&1
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  r new_host_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host_$i.json
  r old_host_$i 90 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100
  r new_host_z1_$i 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1_$i.json
  r old_host_z1_$i 90 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
tail -3 $out/suite.txt; grep -E "^rc=[1-9]" $log
grep -E "^=== |many small|^ +8 +2 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-230
