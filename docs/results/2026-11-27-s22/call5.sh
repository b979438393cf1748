#!/usr/bin/env bash
# Session 22, call 5 (nvidia-h200-x2), at 12f51ce (idle tasks only when nothing is open; the
# shared-memory segment's own tag): world_collectives_test at 4 ranks three times (hung 4 of 5 in
# call 3) and at 4 ranks spinning, 2 and 3 ranks; gpu_world_test at 2 ranks and 1 rank x 2 GPUs;
# world_failures_test at 4 ranks; then the host backend's rows, new and e46eb8a taking turns.
set -uo pipefail
st=$PWD/.gpu-slim; out=$OUT/c5; mkdir -p $out/json
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)" > $out/machine.txt
nvidia-smi --query-gpu=index,name --format=csv >> $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
t0=$SECONDS
t() { local name=$1 lim=$2; shift 2; local s=$SECONDS; timeout $lim "$@" > $out/$name.log 2>&1; echo "$name rc=$? $((SECONDS-s)) s $(grep -E '\[  (PASSED|FAILED) ' $out/$name.log | tr '\n' ' ')" >> $out/tests.txt; }
for i in 1 2 3; do t wc_np4_$i 60 "${mp[@]}" -np 4 $st/bin/world_collectives_test; done
t wc_spin_np4 90 "${mp[@]}" -np 4 -x ATOMR_SPIN=pause $st/bin/world_collectives_test
t wc_np2 60 "${mp[@]}" -np 2 $st/bin/world_collectives_test
t wc_np3 60 "${mp[@]}" -np 3 $st/bin/world_collectives_test
t wf_np4 60 "${mp[@]}" -np 4 $st/bin/world_failures_test
t gw_np2 90 "${mp[@]}" -np 2 $st/bin/gpu_world_test
t gw_np1 90 "${mp[@]}" -np 1 $st/bin/gpu_world_test
log=$out/c5.log
r() { local name=$1 lim=$2; shift 2; echo "=== $name: $*" >> $log; timeout $lim "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  r new_host_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -J $out/json/host_$i.json
  r old_host_$i 60 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100
  r new_host_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0 -J $out/json/host_z1_$i.json
  r old_host_z1_$i 60 "${mp[@]}" -np 2 $st/bin/atomr_old bench coll all_reduce --host -b 8 -e 1M -f 8 -n 1000 -w 100 -z 1 --many 0
done
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
echo "all done in $((SECONDS-t0)) s" >> $log
cat $out/tests.txt; grep -E "^rc=[1-9]" $log
grep -E "^=== |many small|^ +8 +2 " $log | sed -E "s/mpirun .* -np 2 //" | cut -c1-230
