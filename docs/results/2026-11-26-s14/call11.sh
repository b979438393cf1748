#!/usr/bin/env bash
# Session 14, call 11: the host backend's 1000 x 2 KiB with the packs reduced by point-to-point
# recursive doubling up to 4 MiB (ATOMR_HOST_RD_BYTES=4194304), without and with call 8's bursts
# (the staged binary: 428c353 + call8_host_burst.diff), against the defaults, three rounds.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c11; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: 428c353 + call8_host_burst.diff date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH)
NEW=$st/bin/atomr; OLD=$root/.gpu-s1/ab14/atomr_428c353; log=$out/c11.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
h=(bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000)
for i in 1 2 3; do
  r old_default_$i 60 "${mp[@]}" -np 2 $OLD "${h[@]}"
  r old_rd4m_$i 60 "${mp[@]}" -x ATOMR_HOST_RD_BYTES=4194304 -np 2 $OLD "${h[@]}"
  r burst_default_$i 60 "${mp[@]}" -np 2 $NEW "${h[@]}"
  r burst_rd4m_$i 60 "${mp[@]}" -x ATOMR_HOST_RD_BYTES=4194304 -np 2 $NEW "${h[@]}"
done
echo "=== trace_burst_rd4m" >> $log
timeout 60 "${mp[@]}" -x ATOMR_HOST_RD_BYTES=4194304 -x ATOMR_TRACE_REQUESTS=1000 -x ATOMR_TRACE=$out/tr -np 2 $NEW "${h[@]}" 2>&1 | grep "many small" >> $log
python3 $root/launch/trace-batches $out/tr.rank0.json $out/tr.rank1.json >> $log 2>&1; rm -f $out/*.json
grep -E "^rc=[1-9]" $log
grep -E "^===|many small" $log | sed -e 's/^=== \([A-Za-z0-9_]*\):.*/\1/' -e 's/# many small: 1000 x 2048 B all_reduce: //' -e 's/(.*issues)//'
sed -n '/=== trace_burst/,$p' $log
