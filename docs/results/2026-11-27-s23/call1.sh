#!/usr/bin/env bash
# Session 23, call 1 (nvidia-h200-x2), at f851b86 (code b9967bc): where 1000 x 2 KiB all_reduces
# in one submit_all call spend their time, host backend and NCCL: many_small_probe medians, one
# request timeline each (launch/trace-batches), the host probe under the sampling profiler;
# nccl-tests' group of 1000 for comparison.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name --format=csv; lscpu | grep -E "Model name|MHz|L3"; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for i in 1 2; do
  r probe_host_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048
  r probe_gpu_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r nt_m1000_$i 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
done
r many_host 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
r many_gpu 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
for b in host gpu; do
  flag=$([[ $b == host ]] && echo --host || true)
  r traced_$b 60 "${mp[@]}" -x ATOMR_TRACE=$out/tr_$b -x ATOMR_TRACE_REQUESTS=1000 -np 2 $st/bin/atomr bench coll all_reduce $flag -b 8 -e 8 -n 20 -w 5 --many 1000
  for k in 0 1; do echo "--- $b rank $k" >> $log; python3 launch/trace-batches $out/tr_$b.rank$k.json >> $log 2>&1; done
done
(cd $out && tar czf trace.tar.gz tr_*.rank*.json && rm -f tr_*.rank*.json)
r prof_host 90 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof -np 2 $st/bin/many_small_probe 3000 1000 2048
python3 launch/pc-profile-report --threads --raw-out $out/prof.raw $out/prof.*.txt > $out/prof_report.txt 2>&1; rm -f $out/prof.*.txt
cp -L /lib/x86_64-linux-gnu/libc.so.6 $out/libc.so.6 2>/dev/null
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small|^ +2048 +" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-250
sed -n '/=== traced_host/,$p' $log | grep -vE "^#|^ +8 " | cut -c1-200 | head -80
