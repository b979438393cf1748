#!/usr/bin/env bash
# The `multihost` tests: three "hosts" on this machine, each a network namespace with its own
# hostname and address on a private bridge (../shared/harness.md, section 4), and Open MPI's rsh
# launcher entering them instead of ssh. Runs, across them: `atomr info` (6 ranks on 3 nodes), the
# bootstrap test at 6 ranks, the world collectives at 3 and 6 ranks, the router and buffer tests at
# 6 ranks, and a stopped rank on the second host, while the others wait on it and after their
# collective timed out (the job must end within the heartbeat timeout + 10 s, the rank named).
# Needs root (network namespaces, unshare --uts); exits 77 (CTest: skipped) with the reason if not.
#   run_multihost.sh <build dir>
set -uo pipefail
build=$1
skip() { echo "multihost: skipped: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "needs root for network namespaces (running as uid $(id -u))"
for tool in ip nsenter unshare mpirun; do command -v $tool >/dev/null || skip "no $tool"; done
hosts=3
prefix=amh$$
work=$(mktemp -d)
source "$(dirname "${BASH_SOURCE[0]}")/namespace_hosts.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GTEST_COLOR=no
# mpirun <ranks per host> <args...>, from inside host 1.
mp() {
  local per=$1
  shift
  timeout 240 nsenter --net=/run/netns/$prefix-h1 unshare --uts /bin/sh -c 'hostname node1; exec "$0" "$@"' \
    mpirun --allow-run-as-root --oversubscribe --bind-to none --mca plm_rsh_agent "$work/nsrsh" \
    --host $net.11:$per,$net.12:$per,$net.13:$per -np $((3 * per)) \
    --mca oob_tcp_if_include $net.0/24 --mca btl_tcp_if_include $net.0/24 \
    -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -x GTEST_COLOR -x ATOMR_ROUTER_TEST_MESSAGES \
    -x ATOMR_HEARTBEAT_MS -x ATOMR_HEARTBEAT_TIMEOUT_MS "$@"
}
failed=0
check() {  # check <name> <command...>: passes when the command exits 0
  local name=$1
  shift
  local start=$SECONDS
  if "$@" >"$work/$name.log" 2>&1; then
    echo "multihost: $name: passed ($((SECONDS - start)) s)"
  else
    echo "multihost: $name: FAILED (rc $?, $((SECONDS - start)) s); its output:"
    tail -40 "$work/$name.log"
    failed=1
  fi
}

check info mp 2 "$build/bin/atomr" info
if ! grep -q "6 rank(s) on 3 node(s)" "$work/info.log"; then
  echo "multihost: info: expected '6 rank(s) on 3 node(s)'"; grep "rank(s) on" "$work/info.log"; failed=1
fi
grep -E "rank\(s\) on|MPI, " "$work/info.log" | head -3
check bootstrap_6 mp 2 "$build/tests/mpi/bootstrap_test"
check world_collectives_3 mp 1 "$build/tests/mpi/world_collectives_test"
check world_collectives_6 mp 2 "$build/tests/mpi/world_collectives_test"
# Per ordered pair: 30 pairs over TCP between namespaces, 150,000 messages in all (20,000 a pair
# took 36 s of the test command's time on two cores; the ordering checks need no more).
export ATOMR_ROUTER_TEST_MESSAGES=5000
check router_6 mp 2 "$build/tests/mpi/router_test"
check buffers_6 mp 2 "$build/tests/mpi/buffers_test"
check token_sum_2x mp 1 "$build/bin/atomr-example-token-sum"

# A stopped rank (rank 1, on the second host with --map-by node): the job ends within the heartbeat
# timeout (3 s) + 10 s, timed in milliseconds, rank 1 named; once while the others wait in their
# all_reduce, once after their all_reduce timed out (1 s) and they are leaving.
export ATOMR_HEARTBEAT_MS=200 ATOMR_HEARTBEAT_TIMEOUT_MS=3000
ends_named() {  # ends_named <name> <mode> [mpirun args...]: fails unless the job ends non-zero in 13 s, naming rank 1
  local name=$1 mode=$2
  shift 2
  local start rc took
  start=$(date +%s%3N)
  mp 2 --map-by node "$@" "$build/tests/failures/failure_scenarios" "$mode" >"$work/$name.log" 2>&1
  rc=$? took=$(($(date +%s%3N) - start))
  if [[ $rc != 0 && $took -le 13000 ]] && grep -Eq "rank 1 \(node node2, pid [0-9]+\) has not answered" "$work/$name.log"; then
    echo "multihost: $name: passed (job ended in $took ms, rc $rc, $(grep -Eom1 'rank 1 \(node [^)]*\) has not answered for [0-9.]+ s' "$work/$name.log"))"
  else
    echo "multihost: $name: FAILED (rc $rc after $took ms)"; tail -20 "$work/$name.log"; failed=1
  fi
}
ends_named stopped_rank stop
ATOMR_COLL_TIMEOUT_MS=1000 ends_named stopped_rank_after_timeout timeout -x ATOMR_COLL_TIMEOUT_MS
exit $failed
