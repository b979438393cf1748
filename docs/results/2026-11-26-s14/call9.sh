#!/usr/bin/env bash
# Session 14, call 9 (428c353 staged): the host backend's 1000 x 2 KiB with waiting callers not
# assisting (ATOMR_WAIT_ASSIST=0) and looking longer before they sleep (ATOMR_WAIT_LOOK_US), against
# the defaults, three rounds; the timeline of one call with ATOMR_WAIT_ASSIST=0.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH)
A=$root/.gpu-s1/ab14/atomr_428c353; log=$out/c9.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
h=(bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000)
for i in 1 2 3; do
  r default_$i 60 "${mp[@]}" -np 2 $A "${h[@]}"
  r noassist_$i 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=0 -np 2 $A "${h[@]}"
  r look10ms_$i 60 "${mp[@]}" -x ATOMR_WAIT_LOOK_US=10000 -np 2 $A "${h[@]}"
done
echo "=== trace_noassist" >> $log
timeout 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST=0 -x ATOMR_TRACE_REQUESTS=1000 -x ATOMR_TRACE=$out/tr -np 2 $A "${h[@]}" 2>&1 | grep "many small" >> $log
python3 $root/launch/trace-batches $out/tr.rank0.json $out/tr.rank1.json >> $log 2>&1; rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^===|many small" $log | sed -e 's/^=== \([A-Za-z0-9_]*\):.*/\1/' -e 's/# many small: 1000 x 2048 B all_reduce: //' -e 's/(.*issues)//'
sed -n '/=== trace_noassist/,$p' $log
