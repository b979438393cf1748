#!/usr/bin/env bash
# The `slurm` test: a private Slurm on this machine (tests/slurm/private-slurm) runs
# slurm/bench-coll.sbatch as a real batch job, 2 tasks on one node (host backend where no GPU is
# visible), and checks what the job wrote: every value right, a JSON report per collective, the
# job's exit code, the plots. Then a job asking for an unknown collective must fail with its
# reason, and a job whose rank is killed must end fast. Last, the given MPI test programs run
# under `srun --mpi=pmix -n 2` (the bootstrap reads Slurm's and
# PMIx's variables there, not Open MPI's).
#   test_bench_coll_sbatch.sh <source dir> <atomr program> <work dir> <failure_scenarios> [mpi test program...]
set -euo pipefail
src=${1:?source dir}
atomr=${2:?atomr program}
work=${3:?work dir}
scenarios=${4:?failure_scenarios program}
shift 4

if [[ $(id -u) != 0 ]]; then
  echo "SKIP: a private slurmd must run as root (run the slurm tests as root, as CI does)"
  exit 77
fi
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/job-*.out; do [[ -f $f ]] && { echo "== $f" >&2; cat "$f" >&2; }; done
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
root=$work/slurm
trap '"$src/tests/slurm/private-slurm" stop "$root"' EXIT
"$src/tests/slurm/private-slurm" start "$root"
export SLURM_CONF=$root/slurm.conf
cd "$work"

export ATOMR_HOME=$src ATOMR_BIN=$atomr ATOMR_GPUS_PER_RANK=0
export ATOMR_BENCH_ARGS="-b 8 -e 64K -f 8 -n 20 -w 2 --many 0"

# 1. Two collectives on 2 tasks: the job passes and leaves a table and a JSON report for each.
ATOMR_BENCH_OPS="all_reduce all_gather" ATOMR_RESULTS=$work/results \
  sbatch --wait --parsable -N 1 --ntasks-per-node=2 -t 5 -o "$work/job-%j.out" "$src/slurm/bench-coll.sbatch" \
  >"$work/job1.id" || fail "the benchmark job failed (rc $?)"
out=$work/job-$(cat "$work/job1.id").out
grep -q "bench-coll: 2 collective(s) passed" "$out" || fail "no success line in $out"
for op in all_reduce all_gather; do
  grep -q "# atomr bench coll: $op, 2 ranks (host backend" "$work/results/$op.txt" || fail "$op: not run on 2 ranks"
  grep -q "Out of bounds values : 0 OK" "$work/results/$op.txt" || fail "$op: wrong values"
  tr -d ' \n' <"$work/results/$op.json" | grep -q '"wrong":0' || fail "$op: the JSON report has no \"wrong\": 0"
done
grep -q "2 rank(s) on 1 node(s)" "$work/results/info.txt" || fail "atomr info did not see 2 ranks"
for f in busbw.svg time.png ratio.svg summary.md; do
  [[ -s $work/results/report/$f ]] || fail "the job wrote no report/$f"
done
grep -q "^## all_gather, 2 rank(s)" "$work/results/report/summary.md" || fail "the report has no all_gather table"

# 2. An unknown collective: the job fails (sbatch --wait returns its exit code) and says why.
if ATOMR_BENCH_OPS="all_reduce no_such_op" ATOMR_RESULTS=$work/results2 \
  sbatch --wait --parsable -N 1 --ntasks-per-node=2 -t 5 -o "$work/job-%j.out" "$src/slurm/bench-coll.sbatch" \
  >"$work/job2.id"; then
  fail "a job with an unknown collective passed"
fi
out=$work/job-$(cat "$work/job2.id").out
grep -q "bench-coll: FAILED: no_such_op" "$out" || fail "the failed job did not name the failed collective"

# 3. A killed and a stopped rank of 4 under srun, started by atomr-launch (--kill-on-bad-exit=1):
#    each job ends within the heartbeat timeout (3 s) + 10 s, non-zero; Slurm names the killed
#    task, liveness the stopped rank.
for case in "kill|srun: error: [^ ]+: task 1: Killed" "stop|rank 1 \(node [^,]+, pid [0-9]+\) has not answered"; do
  ATOMR_HEARTBEAT_MS=200 ATOMR_HEARTBEAT_TIMEOUT_MS=3000 "$src/tests/failures/expect_job_ends.sh" 13 \
    -m "${case#*|}" -- "$src/launch/atomr-launch" --launcher srun -n 4 --oversubscribe "$scenarios" "${case%%|*}" \
    >"$work/srun-${case%%|*}.log" 2>&1 ||
    { cat "$work/srun-${case%%|*}.log" >&2; fail "a ${case%%|*} rank under srun did not end the job fast, named"; }
done

# 4. MPI test programs launched by srun itself.
for prog in "$@"; do
  srun -N 1 -n 2 --mpi=pmix -t 5 "$prog" --gtest_color=no >"$work/srun-$(basename "$prog").log" 2>&1 ||
    { cat "$work/srun-$(basename "$prog").log" >&2; fail "srun -n 2 $(basename "$prog") failed"; }
  grep -q "PASSED" "$work/srun-$(basename "$prog").log" || fail "$(basename "$prog") under srun: no PASSED line"
done
echo "slurm: bench-coll job passed and failed as expected; $# MPI test program(s) passed under srun"
