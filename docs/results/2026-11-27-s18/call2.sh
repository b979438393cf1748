#!/usr/bin/env bash
# Session 18, call 2 (nvidia-h200-x2): many_small_probe (1000 x 2 KiB all_reduces in one
# submit_all call, 300 calls a run, median) with the done mark and without it (5cd3b64), taking
# turns; then the request timeline of the new engine's one-call runs, batch by batch.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "commit: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  r old_probe_$i 60 "${mp[@]}" -np 2 $st/old/many_small_probe 300 1000 2048 --gpu
  r new_probe_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
done
for i in 1 2; do
  r traced_$i 60 "${mp[@]}" -x ATOMR_TRACE=$out/many$i -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
  for k in 0 1; do python3 launch/trace-batches $out/many$i.rank$k.json >> $log 2>&1; done
done
rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small" $log | cut -c1-200
sed -n '/=== traced_1/,$p' $log | grep -vE "^#|many small" | cut -c1-200 | head -80
