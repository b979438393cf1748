#!/usr/bin/env bash
# Session 17, call 5 (nvidia-h200-x2, 0e61fc9: atomr-launch picks ob1 where the host has no RDMA):
# MPI_Init to the first all_reduce, 2 ranks, 12 runs each way taking turns: plain mpirun (Open
# MPI's own pml) and launch/atomr-launch with its defaults (ob1 here, bound near the GPU); then
# the launcher's GPU binding and its command line.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c5; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; mpirun --version | head -1
  echo "rdma devices: $(ls /sys/class/infiniband 2>&1 | tr '\n' ' ')"; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
A=$st/bin/atomr
log=$out/c5.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
echo "launcher: $(launch/atomr-launch --dry-run -n 2 $A bench coll all_reduce -b 8 -e 8 -n 10 -w 1 --many 0)" >> $log
for i in $(seq 1 12); do
  r mpirun_$i 60 mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -np 2 $A bench coll all_reduce -b 8 -e 8 -n 10 -w 1 --many 0
  r launch_$i 60 launch/atomr-launch -n 2 -x LD_LIBRARY_PATH $A bench coll all_reduce -b 8 -e 8 -n 10 -w 1 --many 0
done
r bind_gpu 30 launch/atomr-launch -n 2 --bind gpu sh -c 'echo "local rank $OMPI_COMM_WORLD_LOCAL_RANK: $(taskset -pc $$)"'
echo "all done in $((SECONDS-t0)) s" >> $log
cat $out/machine.txt; grep -E "^rc=[1-9]|^launcher" $log
for k in mpirun launch; do echo "$k: $(awk -v k=$k '/^=== /{n=$2} /MPI_Init to first/ && index(n, k"_")==1 {sub(/.*done: /,""); print}' $log | sort -n | tr '\n' ' ')"; done
for k in mpirun launch; do echo "$k MPI_Init: $(awk -v k=$k '/^=== /{n=$2} /startup, max/ && index(n, k"_")==1 {print $8}' $log | sort -n | tr '\n' ' ')"; done
grep -A3 "=== bind_gpu" $log
