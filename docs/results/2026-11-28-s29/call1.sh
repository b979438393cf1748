#!/usr/bin/env bash
# Session 29, call 1 (nvidia-h200-x2), af4381e: what a cache line costs between two of the GPU
# machine's vCPUs (tools/c2c.cpp); many_small_probe --gpu with the ranks on near and on far CPUs,
# and new against the session's starting code (e6ecfe0), taking turns; the host backend's probe;
# bench coll --many 1000 and nccl-tests' group; all_to_all 16-64 MiB in 20 rounds (rounds_us).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c1; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; lscpu
  for c in 0 1 2 16; do echo "cpu$c siblings: $(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null) core: $(cat /sys/devices/system/cpu/cpu$c/topology/core_id 2>/dev/null)"; done
  which perf; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
r c2c 60 $ab/c2c
r c2c_pairs 60 $ab/c2c 1 2 2 3 8 9 16 17 0 31 15 16
# Each rank on 4 CPUs: near (0-3 / 4-7) or spread (0,8,16,24 / 1,9,17,25).
cat > /tmp/on_cpus <<'EOS'
#!/usr/bin/env bash
set -- "$@"; sets=($ATOMR_X_CPUS); exec taskset -c ${sets[$OMPI_COMM_WORLD_RANK]} "$@"
EOS
chmod +x /tmp/on_cpus
for i in 1 2; do
  r probe_near_$i 60 "${mp[@]}" -x ATOMR_X_CPUS="0-3 4-7" -np 2 /tmp/on_cpus $st/bin/many_small_probe 300 1000 2048 --gpu
  r probe_spread_$i 60 "${mp[@]}" -x ATOMR_X_CPUS="0,8,16,24 1,9,17,25" -np 2 /tmp/on_cpus $st/bin/many_small_probe 300 1000 2048 --gpu
done
for i in 1 2 3 4; do
  r probe_new_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048 --gpu
  r probe_old_$i 60 "${mp[@]}" -np 2 $ab/probe_e6e 300 1000 2048 --gpu
done
for i in 1 2; do
  r probe_host_new_$i 60 "${mp[@]}" -np 2 $st/bin/many_small_probe 300 1000 2048
  r probe_host_old_$i 60 "${mp[@]}" -np 2 $ab/probe_e6e 300 1000 2048
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do
  r many_$i 60 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_$i.json
done
for i in 1 2 3; do
  r a2a_$i 90 "${mp[@]}" -np 2 $a bench coll all_to_all -b 16M -e 64M -f 4 -n 200 -w 20 --rounds 20 --many 0 -J $out/json/a2a_$i.json
done
r nt_a2a 60 "${mp[@]}" -np 2 $nt/alltoall_perf -b 16M -e 64M -f 4 -n 200 -w 20
echo "total ${SECONDS}s" >> $log
(cd $out && tar czf json.tar.gz json && rm -rf json)
grep -E "^rc=[1-9]" $log; grep -E "^=== |cpus|many small|many_small_probe:|^ +2048 |^ +16777216|^ +67108864" $log | sed -E 's/^=== ([a-z0-9_]+):.*/\1/' | cut -c1-200; tail -1 $log
