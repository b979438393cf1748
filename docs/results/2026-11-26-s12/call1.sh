#!/usr/bin/env bash
# Session 12, call 1 (nvidia-h200-x2, code of 564a8dc = 66badd4's engine): where the issuing
# and calling threads spend their time back to back and each waited for, 8 B all_reduce, 2 ranks
# (tests/probes/pc_sampler.c preloaded; launch/pc-profile-report names the functions).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c1.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nvidia-smi topo -m; nproc
  lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz"; mpirun --version | head -1; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for z in 0 1; do
  r plain_z$z 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 20000 -w 200 --many 0 -z $z
  r prof_z$z 90 "${mp[@]}" -np 2 -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_z$z -x PC_SAMPLER_US=20 \
    $A bench coll all_reduce -b 8 -e 8 -n 100000 -w 200 --many 0 --rounds 1 -z $z
  python3 $root/launch/pc-profile-report --threads --top 40 --raw-out $out/prof_z$z.raw $out/prof_z$z.*.txt > $out/prof_z$z.report 2>&1
  rm -f $out/prof_z$z.*.txt
done
r nt_z0 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 8 -n 20000 -w 200 -z 0
r nt_z1 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 8 -n 20000 -w 200 -z 1
