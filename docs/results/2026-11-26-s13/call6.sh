#!/usr/bin/env bash
# Session 13, call 6 (6c71d40, staged by launch/stage-gpu): bench p2p three times and the host
# backend's 8 B rows twice more, on another host, to see how much the host moves them.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr; log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do r p2p_$i 90 $A bench p2p; done
for i in 1 2; do
  r host_z0_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 0
  r host_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 1
done
grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
grep -E "^=== p2p|^(4096|16384|65536|262144|1048576) " $log
