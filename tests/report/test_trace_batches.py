#!/usr/bin/python3
"""Tests of launch/trace-batches: its batch rows against a request timeline written here with known
times, one clear line for bad input, and (with --atomr) the timeline of a fresh host-backend
`atomr bench coll` run on 2 ranks: every request of the last many-small call is in one batch row,
and each row's stages come in order.

  test_trace_batches.py --script launch/trace-batches [--atomr bin/atomr --launch launch/atomr-launch]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ARGS = None
ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+([\d.]+)-([\d.]+)\s+([\d.nan]+)\s+([\d.nan]+)\s+([\d.nan]+)\s+([\d.nan]+)-([\d.nan]+)\s*"
    r"(?:\(a bulk call of \d+\))?$")


def run_script(*paths):
    return subprocess.run([ARGS.script, *paths], capture_output=True, text=True, timeout=120)


def rows(output):
    """(first seq, n, handed from, handed to, agreed, called, done, resolved from, resolved to)."""
    out = []
    for line in output.splitlines():
        m = ROW.match(line)
        if m:
            out.append((int(m[1]), int(m[2]), *(float(x) for x in m.groups()[2:])))
    return out


def span(name, seq, batch, start, dur):
    return {"ph": "X", "name": name, "ts": start, "dur": dur, "pid": 0, "tid": 1, "cat": "all_reduce",
            "args": {"seq": seq, "batch": batch, "bytes": 2048, "op": "all_reduce"}}


class Synthetic(unittest.TestCase):
    def test_rows_hold_each_batchs_first_and_last_times(self):
        # Requests 10 and 11 issued together (batch 2), then 12 alone; times in us from 1000.
        events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}}]
        for seq, handed, batch in ((10, 1000.0, 2), (11, 1002.0, 2), (12, 1010.0, 1)):
            agreed = 1020.0 if batch == 2 else 1040.0
            events += [
                span("hand-off", seq, batch, handed, 0.5),
                span("wait for inputs", seq, batch, handed + 0.5, 1.0),
                span("plan agreement", seq, batch, handed + 1.5, agreed - handed - 1.5),
                span("NCCL/MPI call", seq, batch, agreed, 5.0),
                span("record event", seq, batch, agreed + 5.0, 1.0),
                span("on the device", seq, batch, agreed + 6.0, 10.0 + seq - 10),
                span("resolve future", seq, batch, agreed + 16.0 + seq - 10, 0.5),
            ]
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.rank0.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"traceEvents": events}, f)
            r = run_script(path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 requests, 2 batches", r.stdout)
        got = rows(r.stdout)
        self.assertEqual(len(got), 2, r.stdout)
        # Batch of 2: handed 0-2 us, agreed 20, called 25, done 37 (11's), resolved 36.5-37.5.
        self.assertEqual(got[0][:2], (10, 2))
        for want, have in zip((0.0, 2.0, 20.0, 25.0, 37.0, 36.5, 37.5), got[0][2:]):
            self.assertAlmostEqual(have, want, places=1)
        # Request 12 alone: handed 10, agreed 40, called 45, done 58, resolved 58.5.
        self.assertEqual(got[1][:2], (12, 1))
        for want, have in zip((10.0, 10.0, 40.0, 45.0, 58.0, 58.5, 58.5), got[1][2:]):
            self.assertAlmostEqual(have, want, places=1)


class OneClock(unittest.TestCase):
    def test_two_ranks_files_are_read_against_the_earliest_hand_off_of_either(self):
        # Rank 0 hands its request over at 1000 us, rank 1 at 1030; each agreed 10 us later.
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for rank, handed in ((0, 1000.0), (1, 1030.0)):
                events = [span("hand-off", 5, 1, handed, 0.5), span("plan agreement", 5, 1, handed + 0.5, 9.5),
                          span("NCCL/MPI call", 5, 1, handed + 10.0, 2.0),
                          span("on the device", 5, 1, handed + 12.0, 3.0),
                          span("resolve future", 5, 1, handed + 15.0, 1.0)]
                paths.append(os.path.join(tmp, f"t.rank{rank}.json"))
                with open(paths[-1], "w", encoding="utf-8") as f:
                    json.dump({"traceEvents": events}, f)
            own = run_script(*paths)
            common = run_script("--one-clock", *paths)
        self.assertEqual(own.returncode, 0, own.stderr)
        self.assertEqual(common.returncode, 0, common.stderr)
        # Each file on its own clock: both rows start at 0. On one clock: rank 1's starts at 30.
        self.assertEqual([row[2] for row in rows(own.stdout)], [0.0, 0.0], own.stdout)
        got = rows(common.stdout)
        self.assertEqual([row[2] for row in got], [0.0, 30.0], common.stdout)
        self.assertAlmostEqual(got[1][4], 40.0, places=1)  # rank 1's plan agreed at 1040
        self.assertIn("after the first hand-off in any file", common.stdout)


class BadInput(unittest.TestCase):
    def test_a_missing_file_and_a_foreign_json_each_get_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            foreign = os.path.join(tmp, "other.json")
            with open(foreign, "w", encoding="utf-8") as f:
                json.dump({"results": []}, f)
            for path in (os.path.join(tmp, "missing.json"), foreign):
                r = run_script(path)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("not an ATOMR_TRACE file", r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_no_file_prints_the_usage_and_fails(self):
        r = run_script()
        self.assertEqual(r.returncode, 2)
        self.assertIn("Usage: trace-batches [--one-clock] FILE", r.stdout)


class HostBackendRun(unittest.TestCase):
    def test_the_last_submit_all_calls_requests_are_all_in_rows_in_stage_order(self):
        if not ARGS.atomr:
            self.skipTest("needs --atomr and --launch")
        with tempfile.TemporaryDirectory() as tmp:
            prefix = os.path.join(tmp, "mb")
            env = dict(os.environ, ATOMR_TRACE=prefix, ATOMR_TRACE_REQUESTS="200")
            run = subprocess.run(
                [ARGS.launch, "-n", "2", ARGS.atomr, "bench", "coll", "all_reduce", "--host", "-b", "8", "-e", "8",
                 "-n", "5", "-w", "1", "--many", "200"], capture_output=True, text=True, timeout=240, env=env)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
            for rank in (0, 1):
                r = run_script(f"{prefix}.rank{rank}.json")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("200 requests", r.stdout)
                got = rows(r.stdout)
                self.assertEqual(sum(row[1] for row in got), 200, r.stdout)
                # The last call, a submit_group call of 200, went as one bulk call: one traced request.
                self.assertIn("(a bulk call of 200)", r.stdout)
                for seq, n, handed_from, handed_to, agreed, called, done, res_from, res_to in got:
                    self.assertLessEqual(handed_from, handed_to)
                    self.assertLessEqual(handed_from, agreed + 0.05)
                    self.assertLessEqual(agreed, called + 0.05)
                    self.assertLessEqual(called, done + 0.05)
                    self.assertLessEqual(res_from, res_to)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", required=True)
    parser.add_argument("--atomr")
    parser.add_argument("--launch")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest])
