#!/usr/bin/env bash
# Session 11, call 1 (nvidia-h200-x2, the code of df46955): where a back-to-back 8 B all_reduce
# loses its 1.5-3 us to raw. The request timeline (ATOMR_TRACE) of each run is cut into the gaps
# between consecutive NCCL calls (.gpu-tools/issue_gaps.py); variants: default, callers not
# assisting (ATOMR_WAIT_ASSIST=0), no packing (ATOMR_COLL_PACK_BYTES=0); nccl-tests beside them.
set -uo pipefail
root=$PWD; st=$root/.gpu-s1; out=$OUT/c1; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$st/lib NCCL_NVLS_ENABLE=0
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_TRACE -x ATOMR_TRACE_REQUESTS -x ATOMR_WAIT_ASSIST -x ATOMR_COLL_PACK_BYTES)
A=$st/bin/atomr
log=$out/c1.log
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nproc; lscpu
  cat /sys/devices/system/clocksource/clocksource0/current_clocksource; mpirun --version | head -1; } > $out/machine.txt 2>&1
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
export ATOMR_TRACE_REQUESTS=6000
for z in 0 1; do
  r nt_z$z 60 "${mp[@]}" -np 2 $st/nt/all_reduce_perf -b 8 -e 8 -n 5000 -w 200 -z $z
  for v in default noassist nopack default2; do
    unset ATOMR_WAIT_ASSIST ATOMR_COLL_PACK_BYTES
    [[ $v == noassist ]] && export ATOMR_WAIT_ASSIST=0
    [[ $v == nopack ]] && export ATOMR_COLL_PACK_BYTES=0
    export ATOMR_TRACE=$out/tr_${v}_z$z
    r atomr_${v}_z$z 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 5000 -w 200 --many 0 -z $z
    for k in 0 1; do [[ -f $ATOMR_TRACE.rank$k.json ]] && python3 $root/.gpu-tools/issue_gaps.py $ATOMR_TRACE.rank$k.json 2500 >> $log 2>&1; done
    gzip -f $ATOMR_TRACE.rank0.json; rm -f $ATOMR_TRACE.rank1.json
  done
done
unset ATOMR_TRACE ATOMR_WAIT_ASSIST ATOMR_COLL_PACK_BYTES
r sampler_z0 90 "${mp[@]}" -np 2 -x LD_PRELOAD=$st/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/pcs $A bench coll all_reduce -b 8 -e 8 -n 200000 -w 100 --many 0
python3 $root/launch/pc-profile-report --threads --raw-out $out/pcs.raw $out/pcs.*.txt > $out/pcs_report.txt 2>&1; rm -f $out/pcs.*.txt
grep -E "^===|^ +8 +2 |calls over|issuing|gap |^rc=[1-9]" $log | cut -c1-250
