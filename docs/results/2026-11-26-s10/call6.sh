#!/usr/bin/env bash
# Session 10, call 6 (nvidia-h200-x2): A/B of the engine's resolving and freeing. atomr_prev =
# fc51a6e (every finished request resolved and freed in one turn); atomr = 64 resolved per turn,
# freed between turns. Four alternating rounds of the many-small row, nccl-tests' group of 1000
# beside them, then the small all_reduce rows (back to back and -z 1) with each binary.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c6; mkdir -p "$out"
export LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mp=(mpirun --bind-to none -np 2 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/call6.log
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi -L; nproc; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  for b in atomr_prev atomr; do r ${b}_many_$i 120 "${mp[@]}" $st/bin/$b bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000; done
  [[ $i == 2 || $i == 4 ]] && r nt_m1000_$i 60 "${mp[@]}" $st/nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
for b in atomr_prev atomr; do
  for z in 0 1; do r ${b}_small_z$z 90 "${mp[@]}" $st/bin/$b bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z; done
done
grep -E "^===|many small|^ +[0-9]+ +[0-9]+ |^rc=[1-9]" $log | cut -c1-250
