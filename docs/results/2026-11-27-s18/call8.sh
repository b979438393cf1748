#!/usr/bin/env bash
# Session 18, call 8 (nvidia-h200-x2): new3 (4b1beee, and up to 8 finished requests settled at
# once as before the mark) against old (5cd3b64), taking turns: all_to_all and reduce_scatter
# from 16 MiB, many_small_probe and bench coll --many.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
echo "new3: $(cat $st/COMMIT) old: $(cat $st/old/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)" > $out/machine.txt
export LD_LIBRARY_PATH=$st/lib
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3; do
  for v in old new3; do
    if [[ $v == old ]]; then d=$st/old; else d=$st/bin; fi
    r ${v}_large_all_to_all_$i 60 "${mp[@]}" -np 2 $d/atomr bench coll all_to_all -b 16M -e 1G -f 4 -n 50 -w 5 --many 0
    r ${v}_large_reduce_scatter_$i 60 "${mp[@]}" -np 2 $d/atomr bench coll reduce_scatter -b 16M -e 256M -f 4 -n 50 -w 5 --many 0
    r ${v}_probe_$i 60 "${mp[@]}" -np 2 $d/many_small_probe 300 1000 2048 --gpu
    r ${v}_many_$i 60 "${mp[@]}" -np 2 $d/atomr bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
  done
done
grep -E "^rc=[1-9]" $log
grep -E "^=== |many_small_probe:|many small|^ +[0-9]{8,} " $log | sed -E 's/mpirun .* -np 2 //' | awk '/^===/{n=$2; next} /many/{print n, $0; next} {print n, $1, $NF}' | cut -c1-200
