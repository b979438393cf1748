#!/usr/bin/env bash
# Session 19, call 5 (nvidia-h200-x2): prev (bb89fdb), pool (26b4ce9: the kept pack pool) and
# new (retired requests freed a chunk a turn) taking turns on 1000 x 2 KiB (many_small_probe,
# bench coll --many); one request timeline of new; new under the sampling profiler, with the
# machine's libc kept so that its functions can be named here.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new: $(cat $st/COMMIT) pool: $(cat $st/pool/COMMIT) prev: $(cat $st/prev/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c5.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
dir() { case $1 in prev) echo $st/prev;; pool) echo $st/pool;; new) echo $st/bin;; esac; }
for i in 1 2 3 4; do
  for v in prev pool new; do
    r ${v}_probe_$i 60 "${mp[@]}" -np 2 $(dir $v)/many_small_probe 300 1000 2048 --gpu
    r ${v}_many_$i 60 "${mp[@]}" -np 2 $(dir $v)/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r traced 60 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 20 -w 5 --many 1000
for k in 0 1; do python3 launch/trace-batches $out/many.rank$k.json >> $log 2>&1; done
(cd $out && tar czf trace.tar.gz many.rank*.json && rm -f many.rank*.json)
"${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof -np 2 $st/bin/many_small_probe 2000 1000 2048 --gpu >> $log 2>&1
python3 launch/pc-profile-report --threads --raw-out $out/prof.raw $out/prof.*.txt > /dev/null 2>&1; rm -f $out/prof.*.txt
cp -L /lib/x86_64-linux-gnu/libc.so.6 $out/libc.so.6 2>/dev/null
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small" $log | sed -E 's/mpirun .* -np 2 //' | grep -B1 -E "many_small_probe:|many small" | grep -v "^--" | cut -c1-250
sed -n '/=== traced/,$p' $log | grep -vE "^#|^ +8 " | cut -c1-200
