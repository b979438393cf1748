#!/usr/bin/env bash
# Session 27, call 6 (nvidia-h200-x2): HEAD (316a5ba: the latency window opens after three lone
# exchanges in a row) against "old" (395415a, call 4's binary), taking turns: the small rows of
# every collective (-z 0 and 1, 2 ranks; all_reduce at 1 rank x 2 GPUs), the many-small rows (NCCL
# and host), host 8 B; then startup with NCCL_IB_DISABLE=1 against the default (the ~200 ms of
# ncclCommInitRankConfig before NCCL's Init START, where it probes its network plugins).
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c6; mkdir -p "$out/json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
new=$st/bin/atomr; old=$ab/atomr_old
log=$out/c6.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for op in all_reduce all_gather reduce_scatter broadcast all_to_all; do
  for z in 0 1; do
    for v in new old; do
      r small_${op}_z${z}_$v 60 "${mp[@]}" -np 2 ${!v} bench coll $op -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/small_${op}_z${z}_$v.json
    done
  done
done
for z in 0 1; do
  for v in new old; do
    r g2_z${z}_$v 60 "${mp[@]}" -np 1 ${!v} bench coll all_reduce -g 2 -b 8 -e 1M -f 8 -n 1000 -w 100 --many 0 -z $z -J $out/json/g2_z${z}_$v.json
  done
done
for i in 1 2; do
  for v in new old; do
    r many_gpu_${v}_$i 60 "${mp[@]}" -np 2 ${!v} bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000
    r many_host_${v}_$i 60 "${mp[@]}" -np 2 ${!v} bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000
    r host_8b_${v}_$i 60 "${mp[@]}" -np 2 ${!v} bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0
  done
done
for i in 1 2 3 4 5; do
  for ib in 0 1; do
    echo "=== init_ib${ib}_$i ib_disable=$ib" >> $log
    if [[ $ib == 1 ]]; then export NCCL_IB_DISABLE=1; else unset NCCL_IB_DISABLE; fi
    timeout 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH ${NCCL_IB_DISABLE:+-x NCCL_IB_DISABLE} $new bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0 2>&1 | grep -E "MPI_Init to first|# startup" >> $log
  done
done
unset NCCL_IB_DISABLE
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
grep -E "^rc=[1-9]" $log; grep -E "many small" $log | sed 's/.*raw sequential/raw/' | cut -c1-200; tail -1 $log
