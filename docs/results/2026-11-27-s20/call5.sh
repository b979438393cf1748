#!/usr/bin/env bash
# Session 20, call 5 (nvidia-h200-x2): the timeline now says which thread found each request done,
# how many looks found it running and when the last was, and what the graph vote decided.
# Runs with ATOMR_WAIT_ASSIST=0 (mostly slow) and with the default (sometimes slow).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "stage: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
a2a=($st/bin/atomr bench coll all_to_all -b 8 -e 8 -n 1000 -w 200 --many 0 -z 1)
for i in 1 2 3; do
  r noassist_a2a_$i 60 "${mp[@]}" -np 2 -x ATOMR_WAIT_ASSIST=0 -x ATOMR_TRACE=$out/na_$i -x ATOMR_TRACE_REQUESTS=1200 "${a2a[@]}"
done
for i in 1 2 3 4 5 6; do
  r default_a2a_$i 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/da_$i -x ATOMR_TRACE_REQUESTS=1200 "${a2a[@]}"
done
grep -E "^rc=[1-9]" $log
grep -E "^=== |^ +8 +[0-9]+ |stages" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-220
cd $out && tar cJf traces.tar.xz *.json && rm -f *.json
ls -la $out
