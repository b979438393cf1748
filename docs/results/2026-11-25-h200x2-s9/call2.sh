#!/usr/bin/env bash
# Session 9, call 2: where the many-small (1000 x 2 KiB, one submit_all call) time goes on the
# GPUs (request timeline), and the host backend's packed all_reduce in parts (work tree on 521b69b).
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  r many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000
  r host_many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 500 -w 50 --many 1000
  r host_many_rd256k_$i 60 "${mp[@]}" -np 2 -x ATOMR_HOST_RD_BYTES=262144 $A bench coll all_reduce --host -b 8 -e 8 -n 500 -w 50 --many 1000
done
r many_traced 60 "${mp[@]}" -np 2 -x ATOMR_TRACE=$out/tr $A bench coll all_reduce -b 8 -e 8 -n 500 -w 50 --many 1000
echo "=== timeline of the last 3 submit_all runs, rank 0 then 1 (us from the first hand-off)" >> $log
python3 $st/an.py $out/tr.rank0.json 3 >> $log 2>&1
python3 $st/an.py $out/tr.rank1.json 3 >> $log 2>&1
gzip $out/tr.rank*.json
grep -E "^===|many small|^rc=[1-9]|hand-off" $log | cut -c1-400
