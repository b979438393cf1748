#!/usr/bin/env bash
# Session 19, call 3 (nvidia-h200-x2): packed all_reduces take their buffers from a pool of the
# backend's own that keeps freed memory. pack_issue_probe (default pool against kept), then
# old (5cd3b64), prev (bb89fdb) and new (the kept pool) taking turns on 1000 x 2 KiB
# (many_small_probe, bench coll --many), and one request timeline of new.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c3; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) prev: $(cat $st/prev/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
dir() { case $1 in old) echo $st/old;; prev) echo $st/prev;; new) echo $st/bin;; esac; }
r pack_issue 120 $st/bin/pack_issue_probe 200 128 1000
for i in 1 2 3; do
  for v in old prev new; do
    r ${v}_probe_$i 60 "${mp[@]}" -np 2 $(dir $v)/many_small_probe 300 1000 2048 --gpu
    r ${v}_many_$i 60 "${mp[@]}" -np 2 $(dir $v)/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r traced 60 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
for k in 0 1; do python3 launch/trace-batches $out/many.rank$k.json >> $log 2>&1; done
(cd $out && tar czf trace.tar.gz many.rank*.json && rm -f many.rank*.json)
grep -E "^rc=[1-9]" $log
sed -n '/=== pack_issue/,/^rc=/p' $log
grep -E "^=== |many_small_probe:|many small" $log | sed -E 's/mpirun .* -np 2 //' | grep -B1 -E "many_small_probe:|many small" | grep -v "^--" | cut -c1-250
sed -n '/=== traced/,$p' $log | grep -vE "^#|^ +8 " | cut -c1-200
