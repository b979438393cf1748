#!/usr/bin/env bash
# Session 20, call 14 (nvidia-h200-x2), commit d409234 (the world's threads keep off the CPUs
# that take GPU interrupts): all_to_all -z 1 with wait-assist off (mostly slow before) and on;
# the GPU suite (tests part); then the small rows of every collective, back to back and -z 1.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c14; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
for irq in $(grep -i nvidia /proc/interrupts | awk -F: '{print $1}'); do
  echo "irq $irq $(grep "^ *$irq:" /proc/interrupts | awk '{print $(NF-2), $(NF-1)}') effective $(cat /proc/irq/$irq/effective_affinity_list)" >> $out/machine.txt
done
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c14.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
a2a=($st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1)
r debug_1 60 "${mp[@]}" -np 2 -x ATOMR_LOG=debug "${a2a[@]}"
for i in 1 2 3 4 5 6; do
  r noassist_$i 60 "${mp[@]}" -np 2 -x ATOMR_WAIT_ASSIST=0 "${a2a[@]}"
done
for i in 1 2 3; do
  r default_$i 60 "${mp[@]}" -np 2 "${a2a[@]}"
done
t0=$SECONDS
ATOMR_SUITE_PART=tests OUT=$out/suite launch/gpu-suite > $out/suite.txt 2>&1; echo "suite rc=$? in $((SECONDS-t0)) s" >> $out/suite.txt
for z in 1 0; do
  for k in all_reduce all_gather reduce_scatter broadcast all_to_all; do
    r small_${k}_z$z 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll $k -b 8 -e 1M -f 8 -n 500 -w 50 --many 0 -z $z
  done
done
grep -E "^rc=[1-9]" $log
grep -E "GPU interrupts go" $log | head -2
tail -3 $out/suite.txt
grep -E "^=== (noassist|default)|^ +8 +[0-9]+ " $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-160 | head -40
