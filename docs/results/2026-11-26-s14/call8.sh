#!/usr/bin/env bash
# Session 14, call 8: the host backend testing a large request in bursts (mpi_backend, k_burst),
# against 428c353, taking turns, four rounds: 1000 x 2 KiB (--many), the 8 B-1 MiB rows back to
# back and waited for; then the new binary's timeline of one call (launch/trace-batches).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH)
NEW=$st/bin/atomr; OLD=$root/.gpu-s1/ab14/atomr_428c353; log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do
  for b in OLD NEW; do
    A=${!b}
    r many_${b}_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
    r rows_z0_${b}_$i 90 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0
  done
done
r rows_z1_OLD 90 "${mp[@]}" -np 2 $OLD bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1
r rows_z1_NEW 90 "${mp[@]}" -np 2 $NEW bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z 1
echo "=== trace_NEW" >> $log
timeout 60 "${mp[@]}" -x ATOMR_TRACE_REQUESTS=1000 -x ATOMR_TRACE=$out/tr -np 2 $NEW bench coll all_reduce --host -b 8 -e 8 -n 20 -w 2 --many 1000 2>&1 | grep "many small" >> $log
python3 $root/launch/trace-batches $out/tr.rank0.json $out/tr.rank1.json >> $log 2>&1; rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^===|many small" $log | grep -v "^=== rows" | sed -e 's/^=== \([A-Za-z0-9_]*\):.*/\1/' -e 's/# many small: 1000 x 2048 B all_reduce: //' -e 's/(.*issues)//'
grep -E "^=== rows|^ +(8|4096|32768|262144) +[0-9]+ +f32" $log | awk '/^===/{print $2; next}{print "  ", $1, $6, $10, $14, $16, $NF}'
sed -n '/=== trace_NEW/,$p' $log
