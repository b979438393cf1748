#!/usr/bin/env bash
# Session 28, call 10 (nvidia-h200-x2): all_to_all at 16 MiB with -n 200, HEAD (04f189f) and the session
# before's binary (b1eaffc) taking turns, six rounds each, with nccl-tests' alltoall beside them:
# call 9 had new at 0.966-0.998 of raw there, old at 0.968-1.022: a difference, or noise?
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c10; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c10.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in 1 2 3 4 5 6; do
  r a2a_new_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_to_all -b 16M -e 16M -n 200 -w 20 --many 0 -J $out/json/a2a_new_$i.json
  r a2a_old_$i 60 "${mp[@]}" -np 2 $ab/atomr_b1e bench coll all_to_all -b 16M -e 16M -n 200 -w 20 --many 0 -J $out/json/a2a_old_$i.json
done
r nt_alltoall 40 "${mp[@]}" -np 2 $nt/alltoall_perf -b 16M -e 16M -n 200 -w 20
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "^=== |^ +16777216" $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/'; tail -1 $log
