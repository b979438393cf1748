#!/usr/bin/env bash
# Session 15, call 3 (nvidia-h200-x2): 1000 x 2 KiB all_reduces, taking turns, four rounds:
# base (caca21c, the parts of a submit_all call wait in the packing window), nowin (they do not),
# nowin64 (they do not, and the parts are 64 requests, not 128); nccl-tests' group of 1000 before
# and after; then the timeline of one nowin run.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; bins=$root/.gpu-s1/s15; out=$OUT/c3; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
{ echo "date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c3.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
r nt_m1000_a 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3 4; do
  for b in base nowin nowin64; do
    r many_${b}_$i 60 "${mp[@]}" -np 2 $bins/atomr_$b bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r nt_m1000_b 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r many_trace 60 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 -np 2 $bins/atomr_nowin bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
for k in 0 1; do python3 $root/launch/trace-batches $out/many.rank$k.json >> $log 2>&1; done
gzip $out/many.rank*.json
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log
grep -E "^=== many_|many small" $log | sed -E 's/^=== (many_[a-z0-9_]+):.*/\1/; s/# many small:.*atomr concurrent ([0-9.]+) us.*in one submit_all call ([0-9.]+) us.*returned after ([0-9.]+) us.*/  concurrent \1  one call \2  returned \3/' | paste - - 
grep -E "^=== nt_m1000|^ +2048 +512" $log
grep -A6 "many.rank" $log
