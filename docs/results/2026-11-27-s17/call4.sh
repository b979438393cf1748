#!/usr/bin/env bash
# Session 17, call 4 (nvidia-h200-x2, 6fe350e): Open MPI's pml, default (UCX where built) against
# ob1, taking turns: MPI_Init and the whole startup, the NCCL all_reduce rows (the graph vote goes
# by MPI point to point), the host backend's 8 B and many small rows. Does this host have RDMA?
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c4; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nproc; mpirun --version | head -1
  echo "rdma devices: $(ls /sys/class/infiniband 2>&1 | tr '\n' ' ')"; ompi_info 2>/dev/null | grep -E "MCA pml" ; } > $out/machine.txt 2>&1
export LD_LIBRARY_PATH=$st/lib
A=$st/bin/atomr
log=$out/c4.log
t0=$SECONDS
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; local s=$SECONDS; timeout $t "$@" >> $log 2>&1; echo "rc=$? ($((SECONDS-s)) s)" >> $log; }
for i in 1 2 3; do
  for pml in default ob1; do
    mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE); [[ $pml == ob1 ]] && mp+=(--mca pml ob1)
    r ${pml}_ar_z0_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 64K -f 8 -n 2000 -w 100 --many 0 -z 0
    r ${pml}_ar_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce -b 8 -e 64K -f 8 -n 2000 -w 100 --many 0 -z 1
    r ${pml}_host_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 500 --many 1000
    r ${pml}_host_z1_$i 60 "${mp[@]}" -np 2 $A bench coll all_reduce --host -b 8 -e 8 -n 5000 -w 500 --many 0 -z 1
  done
done
echo "all done in $((SECONDS-t0)) s" >> $log
cat $out/machine.txt; grep -E "^rc=[1-9]" $log; python3 $root/.gpu-tools/ab_table.py $log
awk '/^=== /{n=$2} /startup, max/{print n, $0}' $log | cut -c1-200
grep -E "^=== |many small" $log | grep -B1 "many small" | cut -c1-220
