#!/usr/bin/env bash
# Session 15, call 2 (nvidia-h200-x2): nccl_path_probe with its spinner and placement modes (two
# runs; lscpu first), the timeline of 1000 x 2 KiB in one submit_all call (ATOMR_TRACE,
# launch/trace-batches), and all_reduce -z 1 / back to back with each rank held to 4 CPUs.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; lscpu; 
  for c in 0 1 2 3 16; do echo "cpu$c siblings $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list) core $(cat /sys/devices/system/cpu/cpu$c/topology/core_id)"; done; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr; log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for i in 1 2; do r probe_$i 120 "${mp[@]}" -np 2 $st/bin/nccl_path_probe 5000; done
r many_trace 60 "${mp[@]}" -x ATOMR_TRACE=$out/many -x ATOMR_TRACE_REQUESTS=1000 -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
for k in 0 1; do python3 $root/launch/trace-batches $out/many.rank$k.json >> $log 2>&1; done
cat > /tmp/held.sh <<'EOS'
#!/usr/bin/env bash
r=${OMPI_COMM_WORLD_RANK:-0}; exec taskset -c $((2 + 8 * r))-$((5 + 8 * r)) "$@"
EOS
chmod +x /tmp/held.sh
for i in 1 2; do
  r ar_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
  r ar_z1_held4_$i 60 "${mp[@]}" -np 2 /tmp/held.sh $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
  r ar_z0_held4_$i 60 "${mp[@]}" -np 2 /tmp/held.sh $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
done
gzip $out/many.rank*.json
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^round" $log; grep -A12 "many.rank0" $log | head -30
python3 $root/.gpu-tools/ab_table.py $log
grep -E "many small" $log | sed 's/raw sequential.*in one submit_all call/one call/'
