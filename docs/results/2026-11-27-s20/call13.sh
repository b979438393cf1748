#!/usr/bin/env bash
# Session 20, call 13 (nvidia-h200-x2): the fix. A world's progress thread and the thread that
# creates it keep off the CPUs that take its GPUs' interrupts (ATOMR_AVOID_IRQ_CPUS=1, the
# default), against ATOMR_AVOID_IRQ_CPUS=0, taking turns: all_to_all -z 1 with wait-assist off
# (mostly slow before) and on (the default).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c13; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
for irq in $(grep -i nvidia /proc/interrupts | awk -F: '{print $1}'); do
  echo "irq $irq $(grep "^ *$irq:" /proc/interrupts | awk '{print $(NF-2), $(NF-1)}') effective $(cat /proc/irq/$irq/effective_affinity_list)" >> $out/machine.txt
done
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c13.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
a2a=($st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1)
r debug_1 60 "${mp[@]}" -np 2 -x ATOMR_LOG=debug "${a2a[@]}"
for i in 1 2 3 4; do
  for a in 1 0; do
    r noassist_avoid${a}_$i 60 "${mp[@]}" -np 2 -x ATOMR_WAIT_ASSIST=0 -x ATOMR_AVOID_IRQ_CPUS=$a "${a2a[@]}"
    r default_avoid${a}_$i 60 "${mp[@]}" -np 2 -x ATOMR_AVOID_IRQ_CPUS=$a "${a2a[@]}"
  done
done
grep -E "^rc=[1-9]" $log
grep -E "GPU interrupts go" $log | head -4
grep -E "^=== |^ +8 +[0-9]+ " $log | grep -v debug_1 | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
