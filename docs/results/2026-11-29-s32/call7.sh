#!/usr/bin/env bash
# Session 32, call 7 (nvidia-h200: one H200, 16 vCPUs), the last code: the host backend's many
# small row at 2 ranks on the machine's CPUs (bench coll --host --many 1000: per request, one
# submit_all call, one submit_group call and a prepared call, against sequential MPI_Allreduce),
# ATOMR_COLL_BULK=1 / =0 taking turns.
CALL=c7 CALL_BUDGET_S=120
source launch/gpu-call-env
b=$st/bin; mkdir -p $out/json
for i in 1 2; do
  for k in 1 0; do
    r host_b${k}_$i 40 "${mp[@]}" -x ATOMR_COLL_BULK=$k -np 2 $b/atomr bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/host_b${k}_$i.json
  done
done
(cd $out && tar czf json.tar.gz json && rm -rf json)
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-400; tail -1 $log
