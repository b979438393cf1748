#!/usr/bin/env bash
# Session 18, call 4 (nvidia-h200-x2): old (5cd3b64) against new2 (the done mark and settle, with
# every finished future settled at once where nothing else is open, 256 a turn otherwise), six
# rounds taking turns: many_small_probe and bench coll --many; one timeline of new2.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new2: $(cat $st/new2/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none --mca pml ob1 -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4 5 6; do
  for v in old new2; do r ${v}_probe_$i 60 "${mp[@]}" -np 2 $st/$v/many_small_probe 300 1000 2048 --gpu; done
done
for i in 1 2 3; do
  for v in old new2; do r ${v}_many_$i 60 "${mp[@]}" -np 2 $st/$v/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000; done
done
r traced_1 60 "${mp[@]}" -x ATOMR_TRACE=$out/many1 -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/new2/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
for k in 0 1; do python3 launch/trace-batches $out/many1.rank$k.json >> $log 2>&1; done
rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
sed -n '/=== traced_1/,$p' $log | grep -vE "^#|many small|^ +8 " | cut -c1-200 | head -30
