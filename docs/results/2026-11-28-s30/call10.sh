#!/usr/bin/env bash
# Session 30, call 10 (nvidia-h200-x2): a packed batch's steps on the GPU (timing events under
# ATOMR_TRACE), for 1000 x 2 KiB in one submit_group call back to back and with a gap, and 256 x
# 2 KiB (one batch a call).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c10; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c10.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
p=$st/bin/many_small_probe
for i in 1 2; do
  r n1000_$i 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/n1000_$i -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 1000 2048 --gpu --group
done
r n1000_gap 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/n1000_gap -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 1000 2048 --gpu --group --gap
r n256_gap 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/n256_gap -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 256 2048 --gpu --group --gap
echo "total ${SECONDS}s" >> $log
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|packed NCCL|on the GPU" $log | sed 's/mpirun.*-np 2 //' | cut -c1-330; tail -1 $log
