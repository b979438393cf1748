#!/usr/bin/env bash
# Session 14, call 6 (428c353 staged): the request timeline (ATOMR_TRACE, launch/trace-batches)
# of the host backend's 1000 x 2 KiB in one call on the GPU machine's CPUs, with the defaults and
# with ATOMR_HOST_RD_BYTES=4194304, twice each.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x ATOMR_TRACE_REQUESTS=1000)
A=$st/bin/atomr; log=$out/c6.log
h=(bench coll all_reduce --host -b 8 -e 8 -n 20 -w 2 --many 1000)
for i in 1 2; do
  for v in default rd4m; do
    env=(); [[ $v == rd4m ]] && env=(-x ATOMR_HOST_RD_BYTES=4194304)
    echo "=== ${v}_$i" >> $log
    timeout 60 "${mp[@]}" "${env[@]}" -x ATOMR_TRACE=$out/${v}_$i -np 2 $A "${h[@]}" 2>&1 | grep "many small" >> $log
    python3 $root/launch/trace-batches $out/${v}_$i.rank0.json $out/${v}_$i.rank1.json >> $log 2>&1
  done
done
rm -f $out/*.json
cat $log
