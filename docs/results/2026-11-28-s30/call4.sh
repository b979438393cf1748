#!/usr/bin/env bash
# Session 30, call 4 (nvidia-h200-x2), d65c854 (the code of 38a439b): the first all_reduce's slow
# mode, 14 startups each with the request timeline (ATOMR_TRACE) and NCCL's INFO log, for the
# stages of request #1; then the host rows (8 B and many small), bench p2p, and NCCL's many small
# with nccl-tests' group of 1000, at this code.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
tar xJf $PWD/.gpu-nt/nt.tar.xz -C /tmp; nt=/tmp/ntst
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out/json" "$out/tr"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv; for t in perf strace gdb ltrace; do echo "$t: $(command -v $t || echo none)"; done; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
a=$st/bin/atomr
log=$out/c4.log
r() { local name=$1 t=$2; shift 2; (( SECONDS > 545 )) && { echo "skipped $name (time)" >> $log; return; }; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
for i in $(seq 1 14); do
  r start_$i 30 "${mp[@]}" -x ATOMR_TRACE=$out/tr/s$i -x NCCL_DEBUG=INFO -x NCCL_DEBUG_FILE=$out/tr/nccl_s$i.%h.%p -np 2 $a bench coll all_reduce -b 8 -e 8 -n 10 -w 2 --many 0
done
for i in 1 2 3; do
  r many_gpu_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_gpu_$i.json
  r many_host_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 200 -w 20 --many 1000 -J $out/json/many_host_$i.json
  r host_8b_$i 40 "${mp[@]}" -np 2 $a bench coll all_reduce --host -b 8 -e 8 -n 20000 -w 1000 -z 1 --many 0
  r p2p_$i 40 $a bench p2p --max-bytes 64M
done
r nt_m1000_1 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
r nt_m1000_2 40 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
echo "total ${SECONDS}s" >> $log
(cd $out/json && tar czf ../json.tar.gz . ) && rm -rf $out/json
(cd $out/tr && tar czf ../tr.tar.gz . ) && rm -rf $out/tr
grep -E "^rc=[1-9]" $log; cat $out/machine.txt | tail -4; grep -E "# startup|# many small|^ +2048 " $log | cut -c1-300; tail -1 $log
