#!/usr/bin/env bash
# Session 14, call 5 (428c353 staged): the host backend's 1000 x 2 KiB on the GPU machine's CPUs
# (issue 12: >= 3x sequential raw MPI_Allreduce), with the packs' reduction by point-to-point
# recursive doubling up to 4 MiB (ATOMR_HOST_RD_BYTES) and without packing
# (ATOMR_COLL_PACK_BYTES=0), against the defaults; three rounds taking turns.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; lscpu | head -20; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH)
A=$st/bin/atomr; log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
h=(bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000)
for i in 1 2 3; do
  r default_$i 60 "${mp[@]}" -np 2 $A "${h[@]}"
  r rd4m_$i 60 "${mp[@]}" -x ATOMR_HOST_RD_BYTES=4194304 -np 2 $A "${h[@]}"
  r rd1m_$i 60 "${mp[@]}" -x ATOMR_HOST_RD_BYTES=1048576 -np 2 $A "${h[@]}"
  r nopack_$i 60 "${mp[@]}" -x ATOMR_COLL_PACK_BYTES=0 -np 2 $A "${h[@]}"
  r nopack_mpi_$i 60 "${mp[@]}" -x ATOMR_COLL_PACK_BYTES=0 -x ATOMR_HOST_RD_BYTES=0 -np 2 $A "${h[@]}"
done
grep -E "^rc=[1-9]" $log
grep -E "^===|many small" $log | sed -e 's/^=== \([a-z0-9_]*\):.*/\1/' -e 's/# many small: 1000 x 2048 B all_reduce: //'
