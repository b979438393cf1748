#!/usr/bin/env bash
# Session 19, call 4 (nvidia-h200-x2): where the threads' time goes in 1000 x 2 KiB calls:
# many_small_probe (the kept pack pool) at 2 ranks under the sampling profiler (pc_sampler).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
log=$out/c4.log
mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/probe \
  -np 2 $st/bin/many_small_probe 2000 1000 2048 --gpu > $log 2>&1; echo "rc=$?" >> $log
python3 launch/pc-profile-report --threads --raw-out $out/probe.raw $out/probe.*.txt >> $log 2>&1
rm -f $out/probe.*.txt
head -c 20000 $log
