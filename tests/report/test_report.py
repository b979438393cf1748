#!/usr/bin/python3
"""Tests of launch/atomr-report: the plots (SVG axis labels, series names, point counts), the
Markdown table against the inputs' numbers, the baseline comparison, and one clear line for bad
input. The inputs are a stored nccl-tests output (2x H200) and, with --atomr, a fresh host-backend
`atomr bench coll` run on 2 ranks.

  test_report.py --script launch/atomr-report --data tests/report/data [--atomr bin/atomr --launch launch/atomr-launch]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
ARGS = None


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def run_report(*args):
    return subprocess.run([ARGS.script, *args], capture_output=True, text=True, timeout=300)


def svg_texts(path):
    return [t.text for t in ET.parse(path).getroot().iter(SVG + "text") if t.text]


def svg_series(path):
    """Series id -> number of markers (one per point)."""
    out = {}
    for g in ET.parse(path).getroot().iter(SVG + "g"):
        gid = g.get("id", "")
        if gid.startswith("series-"):
            out[gid] = sum(1 for _ in g.iter(SVG + "use"))
    return out


def table_rows(md, heading):
    """The rows of the table under `heading`, as lists of cells."""
    lines = md.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| size") and "---" not in line:
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def nccl_tests_rows(path):
    """(size, out-of-place time) of every result row, read independently of the tool."""
    rows = []
    for line in read(path).splitlines():
        f = line.split()
        if line.startswith("#") or len(f) < 13 or not f[0].isdigit() or int(f[0]) == 0:
            continue
        rows.append((int(f[0]), float(f[5])))
    return rows


class NcclTestsOutput(unittest.TestCase):
    def setUp(self):
        self.input = os.path.join(ARGS.data, "nccl_tests_all_reduce_h200x2.txt")
        self.out = tempfile.mkdtemp(prefix="atomr-report-")

    def test_plots_and_table_match_the_output(self):
        r = run_report("-o", self.out, self.input)
        self.assertEqual(r.returncode, 0, r.stderr)
        expected = nccl_tests_rows(self.input)
        self.assertEqual(len(expected), 10)  # 8 B to 1 GiB by 8x
        for stem in ("busbw", "time", "ratio"):
            for ext in ("png", "svg"):
                self.assertGreater(os.path.getsize(os.path.join(self.out, f"{stem}.{ext}")), 1000)
        texts = svg_texts(os.path.join(self.out, "busbw.svg"))
        self.assertIn("message size (bytes)", texts)
        self.assertIn("bus bandwidth (GB/s)", texts)
        label = "nccl-tests 2.19.6 all_reduce (2r, NVIDIA H200)"
        self.assertIn(label, texts)
        series = svg_series(os.path.join(self.out, "time.svg"))
        self.assertEqual(series.get("series-nccl-tests_2.19.6_all_reduce_2r_NVIDIA_H200"), len(expected), series)
        self.assertIn("time (us)", svg_texts(os.path.join(self.out, "time.svg")))
        md = read(os.path.join(self.out, "summary.md"))
        rows = table_rows(md, "## all_reduce, 2 rank(s)")
        self.assertEqual([(int(r[0]), float(r[1])) for r in rows], expected)

    def test_stdin_is_read_too(self):
        with open(self.input, encoding="utf-8") as f:
            r = subprocess.run([ARGS.script, "-o", self.out, "-"], stdin=f, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.out, "summary.md"), encoding="utf-8") as f:
            self.assertIn("## all_reduce, 2 rank(s)", f.read())


class BadInput(unittest.TestCase):
    def one_line_error(self, content, expect):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(content)
        r = run_report("-o", tempfile.mkdtemp(), f.name)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("atomr-report: error: "), lines[0])
        self.assertRegex(lines[0], expect)
        self.assertNotIn("Traceback", r.stderr)

    def test_truncated_json(self):
        doc = json.dumps({"benchmark": "coll", "collective": "all_reduce", "ranks": 2, "backend": "host", "rows": []})
        self.one_line_error(doc[: len(doc) // 2], r"not valid JSON .*truncated")

    def test_unknown_format(self):
        self.one_line_error("size,time\n8,1.0\n", r"unknown format")

    def test_a_file_from_another_benchmark(self):
        self.one_line_error(json.dumps({"benchmark": "wire", "cases": []}), r"a 'bench wire' result")

    def test_truncated_nccl_tests_output(self):
        lines = read(os.path.join(ARGS.data, "nccl_tests_all_reduce_h200x2.txt")).splitlines(keepends=True)
        first_row = next(i for i, l in enumerate(lines) if not l.startswith("#"))
        head = "".join(lines[:first_row])  # cut off where the results begin
        self.one_line_error(head, r"without any result rows")

    def test_a_missing_file(self):
        r = run_report("-o", tempfile.mkdtemp(), "/nonexistent/coll.json")
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, r"^atomr-report: error: /nonexistent/coll.json: cannot read it")


class HostBackendRun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not ARGS.atomr or not ARGS.launch:
            raise unittest.SkipTest("needs --atomr and --launch for a host-backend run")
        cls.dir = tempfile.mkdtemp(prefix="atomr-report-host-")
        cls.json = os.path.join(cls.dir, "coll.json")
        cmd = [ARGS.launch, "-n", "2", "--oversubscribe", ARGS.atomr, "bench", "coll", "all_reduce", "-b", "8",
               "-e", "64K", "-f", "8", "-n", "5", "-w", "1", "--many", "50", "-J", cls.json]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError(f"the benchmark failed: {r.stdout}{r.stderr}")
        cls.doc = json.loads(read(cls.json))

    def test_plots_and_table_match_the_json(self):
        out = os.path.join(self.dir, "report")
        r = run_report("--title", "host run", "-o", out, self.json)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.doc["rows"]
        commit = self.doc["commit"][:7]
        label = f"atomr all_reduce (2r host, {self.doc['machine']}, {commit})"
        texts = svg_texts(os.path.join(out, "ratio.svg"))
        self.assertIn("raw time / atomr time", texts)
        self.assertIn("raw speed (1.0)", texts)
        self.assertIn(f"{label}: own raw / atomr", texts)
        busbw = svg_series(os.path.join(out, "busbw.svg"))
        self.assertEqual(busbw[re.sub(r"[^A-Za-z0-9_.-]+", "_", "series-" + label).strip("_")], len(rows), busbw)
        self.assertEqual(len([k for k in busbw if k.startswith("series-")]), 2)  # atomr and raw MPI
        for extra in ("many_small.svg", "init.svg"):
            self.assertTrue(os.path.exists(os.path.join(out, extra)), extra)
        md = read(os.path.join(out, "summary.md"))
        table = table_rows(md, "## all_reduce, 2 rank(s)")
        self.assertEqual(len(table), len(rows))
        for cells, row in zip(table, rows):
            self.assertEqual(int(cells[0]), row["size"])
            self.assertEqual(cells[1], f"{row['out_of_place']['time_us']:.2f}")
            self.assertEqual(cells[2], f"{row['out_of_place']['busbw_gbps']:.2f}")
            self.assertEqual(cells[3], f"{row['raw_out_of_place']['time_us']:.2f}")
            self.assertEqual(cells[5], f"{row['ratio']:.3f}")

    def test_a_slower_run_is_flagged_against_its_baseline(self):
        slower = json.loads(json.dumps(self.doc))
        for row in slower["rows"]:
            row["out_of_place"]["time_us"] *= 1.25
        path = os.path.join(self.dir, "slower.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(slower, f)
        out = os.path.join(self.dir, "against")
        r = run_report("--baseline", self.json, "--threshold", "10", "-o", out, path)
        self.assertEqual(r.returncode, 0, r.stderr)
        flagged = [l for l in r.stdout.splitlines() if l.startswith("atomr-report: REGRESSION: atomr all_reduce")]
        self.assertEqual(len(flagged), len(self.doc["rows"]), r.stdout)
        self.assertIn("+25.0 %", flagged[0])
        r = run_report("--baseline", self.json, "--threshold", "10", "--fail-on-regression", "-o", out, path)
        self.assertEqual(r.returncode, 3)
        r = run_report("--baseline", self.json, "--threshold", "30", "--fail-on-regression", "-o", out, path)
        self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--script", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--atomr")
    p.add_argument("--launch")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
