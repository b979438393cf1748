#!/usr/bin/env bash
# Session 14, call 2 (428c353, staged by launch/stage-gpu): the GPU tests that exercise the
# collectives and the devices, then the previous binary (6c71d40) and this one taking turns, three
# rounds: 1000 x 2 KiB (--many), all_reduce and broadcast 8 B-1 MiB back to back and -z 1, the
# host backend's 8 B, and bench p2p / bench device (two rounds).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x GTEST_COLOR)
NEW=$st/bin/atomr; OLD=$root/.gpu-s1/ab14/atomr_old; log=$out/c2.log; tl=$out/tests.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t() { local name=$1; shift; local s=$SECONDS; timeout 200 "$@" > $out/$name.log 2>&1; echo "$name rc=$? $((SECONDS - s))s" | tee -a $tl; }
t world_np2 "${mp[@]}" -np 2 $st/bin/gpu_world_test
t world_np1 "${mp[@]}" -np 1 $st/bin/gpu_world_test
t world_failure_np2 "${mp[@]}" -np 2 $st/bin/gpu_world_failure_test
t device_np1 "${mp[@]}" -np 1 $st/bin/gpu_device_test
t buffers_np2 "${mp[@]}" -np 2 $st/bin/gpu_buffers_test
for i in 1 2 3; do
  for b in OLD NEW; do
    A=${!b}
    r many_${b}_$i 120 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
    r ar_z0_${b}_$i 120 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
    r ar_z1_${b}_$i 120 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
    r bc_z1_${b}_$i 120 "${mp[@]}" -np 2 $A bench coll broadcast -b 8 -e 1M -f 8 -n 2000 -w 100 -z 1
    r host_z0_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 0
    r host_z1_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 200 --many 0 -z 1
  done
done
for i in 1 2; do
  r p2p_OLD_$i 90 $OLD bench p2p
  r p2p_NEW_$i 90 $NEW bench p2p
  r device_OLD_$i 90 $OLD bench device
  r device_NEW_$i 90 $NEW bench device
done
grep -E "^rc=[1-9]" $log
python3 $root/.gpu-tools/ab_table.py $log
grep -E "^=== many|many small" $log | sed 's/raw sequential.*in one submit_all call/one call/'
grep -E "^=== p2p|^(4096|16384|65536|262144|1048576) " $log
grep -E "^=== device|^run|hops" $log
