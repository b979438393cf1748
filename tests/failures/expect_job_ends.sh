#!/usr/bin/env bash
# Runs a job that must fail: it must end (non-zero) within <limit> seconds, and its output must
# match every <regex> given with -m. The time is measured here, around the whole job. Nothing the
# job made may be left in /dev/shm.
#   expect_job_ends.sh <limit, whole seconds> [-m regex]... -- command...
set -uo pipefail
limit=$1
shift
patterns=()
while [[ $1 != -- ]]; do
  [[ $1 == -m ]] || { echo "expect_job_ends: bad argument '$1'" >&2; exit 2; }
  patterns+=("$2")
  shift 2
done
shift
out=$(mktemp)
marker=$(mktemp)
start=$(date +%s%3N)
# A hard stop well past the limit, so that a hung job fails this test instead of hanging CTest.
timeout -s KILL $((limit + 60)) "$@" >"$out" 2>&1
rc=$?
elapsed_ms=$(($(date +%s%3N) - start))
elapsed=$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))
cat "$out"
echo "expect_job_ends: rc=$rc after ${elapsed} s (limit ${limit} s)"
fail=0
[[ $rc != 0 ]] || { echo "FAIL: the job succeeded" >&2; fail=1; }
((elapsed_ms > limit * 1000)) && { echo "FAIL: the job took ${elapsed} s, more than ${limit} s" >&2; fail=1; }
for p in "${patterns[@]}"; do
  grep -Eq "$p" "$out" || { echo "FAIL: no line matches '$p'" >&2; fail=1; }
done
left=$(find /dev/shm -maxdepth 1 -name 'atomr-*' -newer "$marker" 2>/dev/null)
[[ -z $left ]] || { echo "FAIL: left behind in /dev/shm: $left" >&2; fail=1; }
rm -f "$out" "$marker"
exit $fail
