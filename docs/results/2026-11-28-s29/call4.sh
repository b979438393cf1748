#!/usr/bin/env bash
# Session 29, call 4 (nvidia-h200-x2), 2dc1f8c (code as af4381e): the GPU tests (launch/gpu-suite);
# many_small_probe --gpu taking turns with the reverted cache-line layout (b78d345); a sampling
# profile of the probe (tests/probes/pc_sampler.c, every 20 us of CPU) for instruction-level names.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c4; mkdir -p "$out/prof"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
t0=$SECONDS
timeout 330 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r c2c 60 $ab/c2c 0 1 0 16
for i in 1 2 3 4; do
  r probe_head_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r probe_lay_$i 60 "${mp[@]}" -np 2 $ab/probe_lay 300 1000 2048 --gpu
done
r probe_prof 90 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/probe -x PC_SAMPLER_US=20 -np 2 $st/bin/many_small_probe 1000 1000 2048 --gpu
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf prof.tar.gz prof && rm -rf prof)
grep -E "rc=[1-9]" $out/suite.txt; tail -3 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |cpus|many_small_probe:" $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/' | cut -c1-200; tail -1 $log
