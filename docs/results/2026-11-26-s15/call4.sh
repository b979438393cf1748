#!/usr/bin/env bash
# Session 15, call 4 (nvidia-h200-x2): nccl_path_probe's buffer and graph modes (ATOMR_PROBE_MODES=short),
# three runs: eager ncclAllReduce, one graph of it, and a graph of copy-in / all_reduce on a fixed
# staging buffer / copy-out, with and without pointing the copies at other buffers per launch.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib ATOMR_PROBE_MODES=short
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_PROBE_MODES)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do r probe_$i 120 "${mp[@]}" -np 2 $st/bin/nccl_path_probe 5000; done
cat $log
