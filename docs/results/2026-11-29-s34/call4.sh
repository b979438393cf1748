#!/usr/bin/env bash
# Session 34, call 4 (nvidia-h200: one H200; the two-GPU machine not lent), build 43c914c (a bulk
# call's batch gives its state to its first and last entry only; packed batches' graph keys made
# in place; bulk calls agreed on in runs): the GPU tests; 1000 x 2 KiB at 1 rank taking turns
# (--prepared, --group; bench coll --many 1000); the request timeline of --prepared; sampling
# profiles of --prepared and --group (named on the build machine with the unstripped binaries of
# the same build: launch/pc-profile-report --subst).
CALL=c4 CALL_BUDGET_S=500
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json $out/trace
suite 300
for i in 1 2; do
  r prepared_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
  r group_$i 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
done
r many_1 40 "${mp[@]}" -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_1.json
r traced_prepared 30 "${mp[@]}" -x ATOMR_TRACE=$out/trace/prepared -np 1 $b/many_small_probe 100 1000 2048 --gpu --prepared
python3 launch/trace-batches $out/trace/prepared.rank0.json > $out/trace/prepared.batches.txt 2>&1
for how in prepared group; do
  rounds=100000; [[ $how == group ]] && rounds=60000
  r profiled_$how 60 "${mp[@]}" -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof_$how -np 1 $b/many_small_probe $rounds 1000 2048 --gpu --$how
  python3 launch/pc-profile-report --threads --top 45 --raw-out $out/prof_$how.raw $out/prof_$how.*.txt > /dev/null 2>&1
  rm -f $out/prof_$how.*.txt
done
(cd $out && tar czf trace.tar.gz trace && tar czf json.tar.gz json && rm -rf trace json)
echo "total ${SECONDS}s" >> $log
grep -E "rc=[1-9]|failures" $out/suite.txt; tail -2 $out/suite.txt
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
