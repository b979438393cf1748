#!/usr/bin/env bash
# Session 30, call 6 (nvidia-h200-x2), d65c854: how long one packed batch takes from its issue to
# its completion seen, with the GPU idle before it: many_small_probe --gpu --group with 256
# requests of 2 KiB (one batch a call) and 1000 of 512 B, traced (launch/trace-batches), beside
# 1000 x 2 KiB; and the same calls untraced.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; out=$OUT/c6; mkdir -p "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
p=$st/bin/many_small_probe
for shape in "256 2048" "1000 512" "1000 2048"; do
  set -- $shape; tag=n$1_b$2
  r $tag 30 "${mp[@]}" -np 2 $p 300 $1 $2 --gpu --group
  r ${tag}_gap 30 "${mp[@]}" -np 2 $p 100 $1 $2 --gpu --group --gap
  r ${tag}_traced 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/$tag -x ATOMR_TRACE_REQUESTS=4000 -np 2 $p 100 $1 $2 --gpu --group --gap
  for k in 0 1; do echo "--- $tag rank $k" >> $log; python3 launch/trace-batches $out/tr/$tag.rank$k.json 2>&1 | tail -9 >> $log; done
done
echo "total ${SECONDS}s" >> $log
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
grep -E "^rc=[1-9]" $log; grep -vE "^rank [01] thread|progress spans" $log | cut -c1-250; tail -1 $log
