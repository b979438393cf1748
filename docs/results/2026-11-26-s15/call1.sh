#!/usr/bin/env bash
# Session 15, call 1 (nvidia-h200-x2; the tree staged by launch/stage-gpu): raw NCCL under the
# conditions atomr's world runs it in (tests/gpu/probes/nccl_path_probe.cpp, two runs), then
# atomr's all_reduce rows 8 B-1 MiB back to back and -z 1, and 1000 x 2 KiB, beside nccl-tests.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c1; mkdir -p "$out"
mkdir -p /tmp/nt && tar xJf $root/.gpu-nt/nt.tar.xz -C /tmp/nt; nt=/tmp/nt/nt
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib GTEST_COLOR=no
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,uuid --format=csv; nvidia-smi topo -m; nproc
  mpirun --version | head -1; } > $out/machine.txt 2>&1
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
A=$st/bin/atomr; log=$out/c1.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
t0=$SECONDS
for i in 1 2; do r probe_$i 120 "${mp[@]}" -np 2 $st/bin/nccl_path_probe 5000; done
r nt_ar_z0 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 8 -e 1M -f 8 -n 2000 -w 100 -z 0
for i in 1 2; do
  r ar_z0_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 0
  r ar_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z 1
done
r nt_m1000 60 "${mp[@]}" -np 2 $nt/all_reduce_perf -b 2K -e 2K -m 1000 -n 20 -w 5
for i in 1 2 3; do r many_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 8 -n 200 -w 20 --many 1000; done
echo "all done in $((SECONDS-t0)) s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^round" $log
python3 $root/.gpu-tools/ab_table.py $log
grep -E "^=== many|many small|^=== nt_m1000|^ +2048 +512" $log
