#!/usr/bin/env bash
# Session 19, call 2 (nvidia-h200-x2): the driver calls around a packed all_reduce, step by step
# (pack_issue_probe), and one request timeline of 1000 x 2 KiB kept whole.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
r pack_issue 120 $st/bin/pack_issue_probe 200 128 384 1000
r traced 60 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
for k in 0 1; do python3 launch/trace-batches $out/many.rank$k.json >> $log 2>&1; done
(cd $out && tar czf trace.tar.gz many.rank*.json && rm -f many.rank*.json)
cat $log | cut -c1-200
