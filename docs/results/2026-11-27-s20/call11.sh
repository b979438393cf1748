#!/usr/bin/env bash
# Session 20, call 11 (nvidia-h200-x2): the slow spans of call 10 (a 35-45 us stall inside one
# event query or anywhere in the loop, with no context switch) look like interrupt handling on
# the looking thread's CPU. Count the GPUs' interrupts per CPU around all_to_all -z 1 runs with
# and without CUDA graphs, and all_reduce with graphs; where the IRQs are routed.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c11; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c11.log
grep -iE "nvidia|CPU0" /proc/interrupts > $out/interrupts_start.txt
for irq in $(grep -i nvidia /proc/interrupts | awk -F: '{print $1}'); do
  echo "irq $irq affinity $(cat /proc/irq/$irq/smp_affinity_list 2>/dev/null) effective $(cat /proc/irq/$irq/effective_affinity_list 2>/dev/null)" >> $log
done
snap() { grep -i nvidia /proc/interrupts | awk '{s=0; for(i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) {c[i]=$i}; printf "%s", $1; for(i=2;i<=NF;i++) if ($i ~ /^[0-9]+$/) printf " %s", $i; printf "\n"}'; }
r() {
  local name=$1; shift
  snap > $out/before.txt
  echo "=== $name: $*" >> $log
  timeout 60 "$@" >> $log 2>&1; echo "rc=$?" >> $log
  snap > $out/after.txt
  python3 - $out/before.txt $out/after.txt >> $log <<'PY'
import sys
b=[l.split() for l in open(sys.argv[1])]; a=[l.split() for l in open(sys.argv[2])]
for x,y in zip(b,a):
    d=[int(q)-int(p) for p,q in zip(x[1:],y[1:])]
    nz={i:v for i,v in enumerate(d) if v}
    print('irq', x[0], 'total', sum(d), 'by cpu', nz)
PY
}
a2a=($st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1)
r idle_sleep_1s sleep 1
for i in 1 2; do
  r a2a_graph_$i "${mp[@]}" -np 2 "${a2a[@]}"
  r a2a_nograph_$i "${mp[@]}" -np 2 -x ATOMR_NCCL_GRAPHS=0 "${a2a[@]}"
  r a2a_graph_noassist_$i "${mp[@]}" -np 2 -x ATOMR_WAIT_ASSIST=0 "${a2a[@]}"
done
r ar_graph "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1
r probe "${mp[@]}" -np 2 $st/bin/a2a_graph_probe 2000
grep -E "^=== |^irq|^ +8 +[0-9]+ |rc=" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-250
