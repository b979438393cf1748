#!/usr/bin/env bash
# Session 33, call 3 (nvidia-h200: one H200), an experiment: the build of 560cd54 with
# call3_spare_quiet.diff (not committed), in which the progress thread empties spare bulk calls
# (lets go of their entries' buffer references) only once the engine has been quiet for
# ATOMR_SPARE_QUIET_US (0: as the committed code, at once). The question: do the buffers'
# reference counts, taken by the caller's specs and dropped by the progress thread, cost the
# caller a cache miss per buffer per call (150-240 us for a line between this machine's vCPUs)?
# many_small_probe --gpu --group, 0 / 1000 taking turns; --prepared (no spares) as a control.
CALL=c3 CALL_BUDGET_S=240
source launch/gpu-call-env
b=$st/bin
for i in 1 2 3 4; do
  for q in 0 1000; do
    r group_q${q}_$i 20 "${mp[@]}" -x ATOMR_SPARE_QUIET_US=$q -np 1 $b/many_small_probe 300 1000 2048 --gpu --group
  done
done
for q in 0 1000; do
  r gap_q${q} 20 "${mp[@]}" -x ATOMR_SPARE_QUIET_US=$q -np 1 $b/many_small_probe 200 1000 2048 --gpu --group --gap
  r many_q${q} 40 "${mp[@]}" -x ATOMR_SPARE_QUIET_US=$q -np 1 $b/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
done
r prepared 20 "${mp[@]}" -np 1 $b/many_small_probe 300 1000 2048 --gpu --prepared
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |many_small_probe:|# many small" $log | sed 's/mpirun.*-np [12] //' | cut -c1-330; tail -1 $log
