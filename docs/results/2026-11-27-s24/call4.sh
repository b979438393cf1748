#!/usr/bin/env bash
# Session 24, call 4 (nvidia-h200-x2): agree_ahead (44e50ce, "ahead") against 052b85e ("prev"),
# taking turns: many_small_probe back to back and --gap (NCCL), host probe, bench coll --many
# 1000 (NCCL and host); nccl-tests' group of 1000 beside; a timeline of "ahead" (trace-batches).
set -uo pipefail
root=$PWD; st=$root/.gpu-slim; out=$OUT/c4; mkdir -p "$out/tr"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
atomr() { case $1 in prev) echo $st/bin/atomr;; ahead) echo $st/bin/atomr_ahead;; esac; }
probe() { case $1 in prev) echo $st/bin/many_small_probe;; ahead) echo $st/bin/msp_ahead;; esac; }
for i in 1 2 3; do
  for v in prev ahead; do
    r ${v}_probe_gpu_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048 --gpu
    r ${v}_probe_gpu_gap_$i 60 "${mp[@]}" -np 2 $(probe $v) 200 1000 2048 --gpu --gap
    r ${v}_probe_host_$i 60 "${mp[@]}" -np 2 $(probe $v) 300 1000 2048
  done
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2; do
  for v in prev ahead; do
    r ${v}_many_gpu_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
    r ${v}_many_host_$i 60 "${mp[@]}" -np 2 $(atomr $v) bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
r trace_ahead 90 "${mp[@]}" -x ATOMR_TRACE=$out/tr/ahead -x ATOMR_TRACE_REQUESTS=4000 -np 2 $(probe ahead) 100 1000 2048 --gpu
for k in 0 1; do echo "--- ahead rank $k" >> $log; python3 $root/launch/trace-batches $out/tr/ahead.rank$k.json 2>&1 | tail -16 >> $log; done
(cd $out && tar czf tr.tar.gz tr && rm -rf tr)
echo "total ${SECONDS}s" >> $log
grep -E "^=== |many_small_probe:|# many small" $log | grep -B1 -E "many_small_probe:|# many small" | grep -v "^--" | paste - - | sed -E 's/=== ([a-z_0-9]+):.*median ([0-9.]+) us, min ([0-9.]+) us; submit_all returned after ([0-9.]+).*/\1 \2 \3 \4/; s/=== ([a-z_0-9]+):.*raw sequential ([0-9.]+) us, atomr concurrent ([0-9.]+) us: ([0-9.]+x).*call ([0-9.]+) us: ([0-9.]+x) \(the call returned after ([0-9.]+) us.*/\1 seq \2 conc \3 \4 one \5 \6 ret \7/' | sort
