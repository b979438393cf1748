#!/usr/bin/env bash
# The hung-node report as a user met it: 4 ranks of `atomr bench coll all_reduce -b 8 -e 64M` on the
# host backend with ATOMR_COLL_TIMEOUT_MS=3000; once the benchmark has printed its first row, one
# rank is stopped from outside with SIGSTOP. The job must end, non-zero, within the collective
# deadline + 10 s of the stop, and name the stopped rank by its pid.
#   stop_bench_rank.sh <limit s> <atomr> <mpiexec and its options...>
set -uo pipefail
limit=$1 atomr=$2
shift 2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ATOMR_COLL_TIMEOUT_MS=3000 "$@" -x ATOMR_COLL_TIMEOUT_MS "$atomr" bench coll all_reduce -b 8 -e 64M -n 200 -w 5 \
  >"$out" 2>&1 &
job=$!
# The first result row (a size in bytes at the start of a line) says the ranks are in the sweep.
timeout 60 grep -qm1 -E '^ +8 +2 ' <(tail -n +1 -f "$out") || { cat "$out"; echo "FAIL: no first row" >&2; exit 1; }
ranks=($(pgrep -P "$job" -f "bench coll"))
((${#ranks[@]} == 4)) || { cat "$out"; echo "FAIL: expected 4 ranks under pid $job, found ${ranks[*]:-none}" >&2; exit 1; }
victim=${ranks[2]}
kill -STOP "$victim"
start=$(date +%s%3N)
# A hard stop well past the limit, so that a hung job fails this test instead of hanging CTest.
(timeout $((limit + 60)) tail --pid="$job" -f /dev/null || kill -KILL "$job") 2>/dev/null &
wait "$job"
rc=$?
elapsed_ms=$(($(date +%s%3N) - start))
kill -KILL "$victim" 2>/dev/null
cat "$out"
echo "stop_bench_rank: stopped pid $victim; the job ended rc=$rc $((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000))) s later (limit $limit s)"
fail=0
[[ $rc != 0 ]] || { echo "FAIL: the job succeeded" >&2; fail=1; }
((elapsed_ms <= limit * 1000)) || { echo "FAIL: the job took longer than $limit s" >&2; fail=1; }
grep -Eq "rank [0-9] \(node [^,]+, pid $victim\) has not answered for [0-9.]+ s" "$out" ||
  { echo "FAIL: no line names pid $victim as not answering" >&2; fail=1; }
exit $fail
