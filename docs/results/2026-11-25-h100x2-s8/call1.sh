#!/usr/bin/env bash
# Session 8, call 1: where a back-to-back small collective's time goes at 2 ranks (pc_sampler),
# and fresh small-size rows at HEAD.
set -uo pipefail
root=$PWD; stage=$root/.gpu-s1; out=$OUT/p1; mkdir -p "$out/prof"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=$stage/lib NCCL_NVLS_ENABLE=0
A=$stage/bin/atomr
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/p1.log
echo "commit: $(cat $stage/COMMIT) date: $(date -u +%FT%TZ)" > $log
nvidia-smi topo -m >> $log 2>&1
for op in all_gather all_reduce; do
  for z in 0 1; do
    n=prof_${op}_z$z
    echo "=== $n: sampler, mpirun -np 2 atomr bench coll $op -b 8 -e 8 -n 30000 -w 300 --many 0 -z $z" >> $log
    timeout 120 "${mp[@]}" -np 2 -x LD_PRELOAD=$stage/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/$n \
      $A bench coll $op -b 8 -e 8 -n 30000 -w 300 --many 0 -z $z >> $log 2>&1
  done
done
n=prof_g2
echo "=== $n: sampler, mpirun -np 1 atomr bench coll all_reduce -g 2 -b 8 -e 8 -n 30000 -w 300 --many 0" >> $log
timeout 120 "${mp[@]}" -np 1 -x LD_PRELOAD=$stage/lib/libpc_sampler.so -x PC_SAMPLER_OUT=$out/prof/$n \
  $A bench coll all_reduce -g 2 -b 8 -e 8 -n 30000 -w 300 --many 0 >> $log 2>&1
for op in all_gather all_reduce broadcast; do
  for z in 0 1; do
    for wa in auto 0; do
      echo "=== rows_${op}_z${z}_assist$wa: ATOMR_WAIT_ASSIST=$wa mpirun -np 2 atomr bench coll $op -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z" >> $log
      ATOMR_WAIT_ASSIST=$wa timeout 60 "${mp[@]}" -x ATOMR_WAIT_ASSIST -np 2 $A bench coll $op -b 8 -e 1M -f 32 -n 2000 -w 100 --many 0 -z $z >> $log 2>&1
    done
  done
done
cd $out/prof && for f in *.txt; do :; done
for n in prof_all_gather_z0 prof_all_gather_z1 prof_all_reduce_z0 prof_all_reduce_z1 prof_g2; do
  python3 $root/launch/pc-profile-report --threads --top 25 --raw-out $out/prof/$n.raw $out/prof/$n.*.txt > $out/prof/$n.report 2>&1
done
rm -f $out/prof/*.[0-9]*.txt
grep -vE "^#|^\s*$" $log | grep -E "^===|^ +(8|256|8192|262144) " | head -80
grep -E "^# stages" $log | head
