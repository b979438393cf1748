#!/usr/bin/env bash
# Session 29, call 2 (nvidia-h200-x2), af4381e: how much of the caller's time is cross-core cost.
# many_small_probe at 1 rank (host backend, and --gpu) with the rank on two vCPUs that share a
# core (8,9: 52 ns round trip in call 1) against two that do not (0,1 and 0,2: ~200 ns), and
# unbound; then 2 ranks, each on a pair.
set -uo pipefail
rm -rf $PWD/.gpu-stage && tar xJf $PWD/.gpu-pack/stage.tar.xz -C $PWD
root=$PWD; st=$root/.gpu-stage; ab=$root/.gpu-pack/ab; out=$OUT/c2; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 GTEST_COLOR=no LD_LIBRARY_PATH=$st/lib
echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname) cpus: $(nproc)" > $out/machine.txt
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE)
log=$out/c2.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$? (${SECONDS}s)" >> $log; }
cat > /tmp/on_cpus <<'EOS'
#!/usr/bin/env bash
sets=($ATOMR_X_CPUS); exec taskset -c ${sets[$OMPI_COMM_WORLD_RANK]} "$@"
EOS
chmod +x /tmp/on_cpus
r c2c 60 $ab/c2c 8 9 10 11 12 13 4 5 6 7 20 21 24 25 28 29 30 31
for i in 1 2; do
  for cpus in 8,9 0,1 0,2 0-31; do
    r "host1_$cpus" 60 "${mp[@]}" -x ATOMR_X_CPUS="$cpus" -np 1 /tmp/on_cpus $st/bin/many_small_probe 300 1000 2048
  done
  for cpus in 8,9 0,1 0-31; do
    r "gpu1_$cpus" 60 "${mp[@]}" -x ATOMR_X_CPUS="$cpus" -np 1 /tmp/on_cpus $st/bin/many_small_probe 300 1000 2048 --gpu
  done
done
echo "total ${SECONDS}s" >> $log
grep -E "^rc=[1-9]" $log; grep -E "^=== |cpus|many_small_probe:" $log | sed -E 's/^=== ([a-z0-9_,-]+):.*/\1/' | cut -c1-200; tail -1 $log
