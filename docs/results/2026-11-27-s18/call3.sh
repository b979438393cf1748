#!/usr/bin/env bash
# Session 18, call 3 (nvidia-h200-x2): three engines taking turns on 1000 x 2 KiB all_reduces in
# one submit_all call: old (5cd3b64, each future fulfilled before the packing window reopens),
# mid (2334df9, the done mark, futures fulfilled after) and new (settled: fulfilled only where a
# sleeper or a continuation needs it). many_small_probe (300 calls a run, median) and bench coll
# --many; the host backend's many small; one request timeline of the new engine.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) mid: $(cat $st/mid/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
dir() { case $1 in old) echo $st/old;; mid) echo $st/mid;; new) echo $st/bin;; esac; }
for i in 1 2 3 4; do
  for v in old mid new; do r ${v}_probe_$i 60 "${mp[@]}" -np 2 $(dir $v)/many_small_probe 300 1000 2048 --gpu; done
done
for i in 1 2 3; do
  for v in old mid new; do r ${v}_many_$i 60 "${mp[@]}" -np 2 $(dir $v)/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000; done
done
for i in 1 2; do
  for v in old new; do r ${v}_host_$i 60 "${mp[@]}" -np 2 $(dir $v)/atomr bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 500 --many 1000; done
done
r traced_1 60 "${mp[@]}" -x ATOMR_TRACE=$out/many1 -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
for k in 0 1; do python3 launch/trace-batches $out/many1.rank$k.json >> $log 2>&1; done
rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
sed -n '/=== traced_1/,$p' $log | grep -vE "^#|many small|^ +8 " | cut -c1-200 | head -30
