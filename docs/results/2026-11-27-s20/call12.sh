#!/usr/bin/env bash
# Session 20, call 12 (nvidia-h200-x2): the GPUs' interrupts land on CPUs 14 and 16 (call 11).
# all_to_all -z 1 (graphs on, wait-assist off: mostly slow in calls 1-10) with every rank's
# threads kept off those CPUs (taskset, mpirun --bind-to none), against unrestricted runs,
# taking turns; then all threads on CPU 14's neighbours plus 14 itself.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c12; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
grep -i nvidia /proc/interrupts | awk '{print $1, $(NF-2), $(NF-1)}' >> $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_WAIT_ASSIST=0)
log=$out/c12.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
a2a=($st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1)
for i in 1 2 3 4; do
  r noirq_$i 60 taskset -c 0-13,15,17-31 "${mp[@]}" -np 2 "${a2a[@]}"
  r any_$i 60 "${mp[@]}" -np 2 "${a2a[@]}"
done
r irq14_1 60 taskset -c 12-15 "${mp[@]}" -np 2 "${a2a[@]}"
grep -E "^rc=[1-9]" $log
grep -E "^=== |^ +8 +[0-9]+ " $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
