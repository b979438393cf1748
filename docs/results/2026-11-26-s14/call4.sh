#!/usr/bin/env bash
# Session 14, call 4 (428c353 staged): all_to_all at 16-64 MiB, where call 3 measured 0.936-0.990
# of raw, against all_reduce at the same sizes, with and without a completion event per large
# request (ATOMR_COLL_SEAL_BYTES) and with nonblocking communicators; nccl-tests for reference.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr; log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
big=(-b 16M -e 64M -f 2 -n 200 -w 20 --many 0)
r nt_a2a 60 "${mp[@]}" -np 2 $nt/alltoall_perf -b 16M -e 64M -f 2 -n 200 -w 20
for i in 1 2; do
  r a2a_$i 60 "${mp[@]}" -np 2 $A bench coll all_to_all "${big[@]}"
  r a2a_noseal_$i 60 "${mp[@]}" -x ATOMR_COLL_SEAL_BYTES=1073741824 -np 2 $A bench coll all_to_all "${big[@]}"
  r a2a_nonblocking_$i 60 "${mp[@]}" -x ATOMR_NCCL_BLOCKING=0 -np 2 $A bench coll all_to_all "${big[@]}"
  r a2a_rounds1_$i 60 "${mp[@]}" -np 2 $A bench coll all_to_all "${big[@]}" --rounds 1
  r a2a_n800_$i 90 "${mp[@]}" -np 2 $A bench coll all_to_all -b 16M -e 64M -f 2 -n 800 -w 20 --many 0
  r ar_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce "${big[@]}"
done
grep -E "^rc=[1-9]" $log
grep -E "^===|^ +(16777216|33554432|67108864) " $log | cut -c1-60,130-200
