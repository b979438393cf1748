#!/usr/bin/env bash
# Session 14, call 12: the host backend's packs reduced into a second pooled buffer (not in
# place) and pooled buffers reused whatever their size (the staged binary: 428c353 + that change),
# against 428c353, taking turns, four rounds: 1000 x 2 KiB and the 8 B-256 KiB rows; the timeline.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c12; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: 428c353 + host packs not in place date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH)
NEW=$st/bin/atomr; OLD=$root/.gpu-s1/ab14/atomr_428c353; log=$out/c12.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
h=(bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000)
for i in 1 2 3 4; do
  for b in OLD NEW; do r many_${b}_$i 60 "${mp[@]}" -np 2 ${!b} "${h[@]}"; done
done
for b in OLD NEW; do r rows_${b} 90 "${mp[@]}" -np 2 ${!b} bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0; done
echo "=== trace_NEW" >> $log
timeout 60 "${mp[@]}" -x ATOMR_TRACE_REQUESTS=1000 -x ATOMR_TRACE=$out/tr -np 2 $NEW "${h[@]}" 2>&1 | grep "many small" >> $log
python3 $root/launch/trace-batches $out/tr.rank0.json $out/tr.rank1.json >> $log 2>&1; rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^===|many small" $log | grep -v "=== rows" | sed -e 's/^=== \([A-Za-z0-9_]*\):.*/\1/' -e 's/# many small: 1000 x 2048 B all_reduce: //' -e 's/(.*issues)//'
grep -E "^=== rows|^ +(8|4096|32768|262144) +[0-9]+ +f32" $log | awk '/^===/{print $2; next}{print "  ", $1, $6, $10, $14, $16, $NF}'
sed -n '/=== trace_NEW/,$p' $log
