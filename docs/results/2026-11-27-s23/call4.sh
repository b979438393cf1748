#!/usr/bin/env bash
# Session 23, call 4 (nvidia-h200-x2): where the threads of 1000 x 2 KiB in one submit_all call
# (NCCL) spend their time with the new engine: many_small_probe --gpu under the sampling profiler
# (pc_sampler), the report made there (library names) and the raw samples (named here).
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
"${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof -np 2 $st/bin/many_small_probe 3000 1000 2048 --gpu > $out/c4.log 2>&1
python3 $root/launch/pc-profile-report --threads --top 40 --raw-out $out/prof.raw $out/prof.*.txt > $out/report.txt 2>&1; rm -f $out/prof.*.txt
cat $out/c4.log | tail -2; head -120 $out/report.txt | cut -c1-160
