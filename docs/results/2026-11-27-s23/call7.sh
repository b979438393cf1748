#!/usr/bin/env bash
# Session 23, call 7 (nvidia-h200-x2), at 3b7eaee: the host backend's MPI path for 1000 x 2 KiB
# (one rank; two ranks with the shared memory off), old (f851b86) and new taking turns; then the
# GPU tests (launch/gpu-suite, tests part).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for i in 1 2; do
  for v in old new; do
    p=$([[ $v == old ]] && echo $st/bin/msp_old || echo $st/bin/many_small_probe)
    r ${v}_probe_np1_$i 60 "${mp[@]}" -np 1 $p 300 1000 2048
    r ${v}_probe_np2_noshm_$i 60 "${mp[@]}" -x ATOMR_HOST_SHM_BYTES=0 -np 2 $p 300 1000 2048
  done
done
echo "rows done in $((SECONDS-t0)) s" >> $log
timeout 500 env ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
(cd $out && tar czf suite.tar.gz suite && rm -rf suite)
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:" $log | grep -B1 "many_small_probe:" | grep -v "^--" | paste - - | sed -E 's/=== ([a-z_0-9]+):.*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/' | sort
tail -5 $out/suite.txt
