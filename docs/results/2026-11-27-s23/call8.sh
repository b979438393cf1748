#!/usr/bin/env bash
# Session 23, call 8 (nvidia-h200-x2), at 3b7eaee (HEAD's binaries): the small rows of every
# collective, 8 B-1 MiB, back to back and waited for (-z 1), 2 ranks x 1 GPU, one round.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"; nvidia-smi --query-gpu=index,name --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    r small_${op}_z$z 90 "${mp[@]}" -np 2 $st/bin/atomr bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z$z.json
  done
done
echo "all done in $((SECONDS-t0)) s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; tail -1 $log
grep -E "^=== | +(8|64|512|4096|32768|262144) +[0-9]+ +f32" $log | sed -E 's/mpirun .* -np 2 //' | cut -c1-200
