#!/usr/bin/python3
"""Tests of launch/atomr-report: the plots (SVG axis labels, series names, point counts), the
Markdown table against the inputs' numbers, the baseline comparison, and one clear line for bad
input. The inputs are stored results in data/ (an nccl-tests output on 2x H200; bench coll, p2p,
route and fetch JSON as src/apps/bench writes it, from runs on 2x H200 and 2x H100) and, with --atomr, a fresh host-backend `atomr bench coll` run on 2 ranks.
Quickstart checks that launch/quickstart reports on the JSON wherever -J put it (its build and
benchmark replaced by stubs). Performance and PerformancePage check --performance on a fixture and
that docs/performance.md is what it makes of docs/results.

  test_report.py --script launch/atomr-report --data tests/report/data [--atomr bin/atomr --launch launch/atomr-launch]
"""
import argparse
import json
import os
import re
import shutil
import stat
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


def slug(label):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "series-" + label).strip("_")


def data(name):
    return os.path.join(ARGS.data, name)


def load_json(name):
    return json.loads(read(data(name)))


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
        if line.startswith("| ") and "---" not in line:
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows[1:]  # the first is the header


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


def assert_one_line_error(test, r, expect):
    """Exit code 2, one line on stderr, `atomr-report: error: ...` matching `expect`; returns it."""
    test.assertEqual(r.returncode, 2, r.stdout + r.stderr)
    test.assertNotIn("Traceback", r.stderr)
    lines = r.stderr.strip().splitlines()
    test.assertEqual(len(lines), 1, r.stderr)
    test.assertTrue(lines[0].startswith("atomr-report: error: "), lines[0])
    test.assertRegex(lines[0], expect)
    return lines[0]


class BadInput(unittest.TestCase):
    def one_line_error(self, content, expect, *extra):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(content)
        out = tempfile.mkdtemp()
        r = run_report("-o", out, *extra, f.name)
        line = assert_one_line_error(self, r, expect)
        self.assertEqual(os.listdir(out), [])  # nothing written
        return line, f.name

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

    def test_nccl_tests_output_cut_after_some_rows(self):
        lines = read(data("nccl_tests_all_reduce_h200x2.txt")).splitlines(keepends=True)
        first_row = next(i for i, l in enumerate(lines) if not l.startswith("#"))
        for rows, cut in ((4, "".join(lines[: first_row + 4])),  # after the 4th row
                          (9, "".join(lines[: first_row + 9]) + lines[first_row + 9][:30]),  # in the 10th
                          (10, "".join(lines[: first_row + 11]))):  # after the last row, before the end
            with self.subTest(rows=rows):
                line, name = self.one_line_error(cut, r"without its closing '# Avg bus bandwidth' line")
                self.assertEqual(
                    line, f"atomr-report: error: {name}: nccl-tests output without its closing "
                    f"'# Avg bus bandwidth' line: truncated after {rows} result row(s)?")

    def test_nccl_tests_output_cut_on_stdin(self):
        text = "".join(read(data("nccl_tests_all_reduce_h200x2.txt")).splitlines(keepends=True)[:15])
        r = subprocess.run([ARGS.script, "-o", tempfile.mkdtemp(), "-"], input=text, capture_output=True, text=True)
        line = assert_one_line_error(self, r, r"^atomr-report: error: stdin: nccl-tests output without its closing")
        self.assertIn("truncated after 4 result row(s)?", line)

    def test_a_baseline_with_nothing_in_common(self):
        out = tempfile.mkdtemp()
        coll, route = data("coll_all_reduce_h200x2.json"), data("route_2r.json")
        r = run_report("-o", out, "--baseline", route, coll)
        line = assert_one_line_error(self, r, "shares no series")
        self.assertEqual(line, f"atomr-report: error: --baseline: {route} shares no series/sizes with the run "
                               "(baseline: route, 2 rank(s); run: all_reduce, 2 rank(s))")
        self.assertEqual(os.listdir(out), [])
        # The same collective at other ranks, and the same series at other sizes, share nothing either.
        other = json.loads(read(coll))
        other["ranks"] = 4
        self.one_line_error(json.dumps(other), rf"--baseline: {re.escape(coll)} shares no series/sizes with the run "
                            r"\(baseline: all_reduce, 2 rank\(s\); run: all_reduce, 4 rank\(s\)\)$",
                            "--baseline", coll)
        sizes = json.loads(read(coll))
        for row in sizes["rows"]:
            row["size"] += 1
        path = os.path.join(tempfile.mkdtemp(), "other_sizes.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(sizes, f)
        r = run_report("-o", out, "--baseline", path, coll)
        assert_one_line_error(self, r, rf"--baseline: {re.escape(path)} shares no series/sizes with the run")

    def test_a_baseline_sharing_some_sizes_is_compared_on_those(self):
        coll = data("coll_all_reduce_h200x2.json")
        doc = load_json("coll_all_reduce_h200x2.json")
        doc["rows"] = doc["rows"][:2]
        path = os.path.join(tempfile.mkdtemp(), "two_sizes.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        out = tempfile.mkdtemp()
        r = run_report("-o", out, "--baseline", path, coll)
        self.assertEqual(r.returncode, 0, r.stderr)
        md = read(os.path.join(out, "summary.md"))
        rows = table_rows(md, "## Against the baseline (regression: more than 5 % slower)")
        # atomr and raw, each at the two sizes the baseline has
        self.assertEqual([(c[0], int(c[1]), c[4]) for c in rows],
                         [(s, b, "+0.0 %") for s in ("atomr all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea)",
                                                     "raw NCCL all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea)")
                          for b in (8, 512)])

    def without_matplotlib(self, python_args, *args):
        return subprocess.run([sys.executable, *python_args, *args], capture_output=True, text=True, timeout=120)

    def test_a_python3_without_matplotlib(self):
        # -S: no site-packages (where Debian's python3-matplotlib and pip's are), as in a bare
        # pyenv or venv python3.
        probe = subprocess.run([sys.executable, "-S", "-c", "import matplotlib"], capture_output=True)
        if probe.returncode == 0:
            self.skipTest(f"{sys.executable} -S still imports matplotlib")
        out = tempfile.mkdtemp()
        r = self.without_matplotlib(["-S", ARGS.script], "-o", out, data("nccl_tests_all_reduce_h200x2.txt"))
        line = assert_one_line_error(self, r, "matplotlib")
        self.assertEqual(line, f"atomr-report: error: matplotlib is not installed for {sys.executable} (Debian's "
                               "python3-matplotlib, for /usr/bin/python3; launch/setup-deps installs it)")
        self.assertEqual(os.listdir(out), [])
        # --help and usage errors need no matplotlib
        r = self.without_matplotlib(["-S", ARGS.script], "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: atomr-report", r.stdout)
        r = self.without_matplotlib(["-S", ARGS.script], "--threshold", "x", "f")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--threshold: takes a percentage", r.stderr)

    def test_matplotlib_blocked_in_the_interpreter(self):
        # The same, on any machine: `import matplotlib` fails as where it is not installed.
        run = ("import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = sys.argv[1:]; "
               "runpy.run_path(sys.argv[0], run_name='__main__')")
        r = self.without_matplotlib(["-c", run, ARGS.script], "-o", tempfile.mkdtemp(),
                                    data("nccl_tests_all_reduce_h200x2.txt"))
        line = assert_one_line_error(self, r, "matplotlib")
        self.assertEqual(line, f"atomr-report: error: matplotlib is not installed for {sys.executable} (Debian's "
                               "python3-matplotlib, for /usr/bin/python3; launch/setup-deps installs it)")

    def test_a_missing_file(self):
        r = run_report("-o", tempfile.mkdtemp(), "/nonexistent/coll.json")
        self.assertEqual(r.returncode, 2)
        self.assertRegex(r.stderr, r"^atomr-report: error: /nonexistent/coll.json: cannot read it")


class BenchJsonInputs(unittest.TestCase):
    """bench p2p, route and fetch JSON (and a coll file beside them): labels with ranks and
    backend where the file has them, a table per benchmark with the files' numbers, the plots'
    series and point counts."""

    FILES = ("coll_all_reduce_h200x2.json", "p2p_h200x2.json", "route_2r.json", "fetch_ipc_2r.json")
    LABELS = {
        "coll_all_reduce_h200x2.json": ("atomr all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea)",
                                        "raw NCCL all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea)"),
        "p2p_h200x2.json": ("atomr p2p (GPU0->GPU1, NVIDIA H200, 24fa558)",
                            "raw p2p (GPU0->GPU1, NVIDIA H200, 24fa558)"),
        "route_2r.json": ("atomr route (2r, vm, bfa940f)", "raw route (2r, vm, bfa940f)"),
        "fetch_ipc_2r.json": ("atomr fetch cuda_ipc (2r cuda, NVIDIA H100 80GB HBM3 (vm), bfa940f)",
                              "raw fetch cuda_ipc (2r cuda, NVIDIA H100 80GB HBM3 (vm), bfa940f)"),
    }
    HEADINGS = {"coll_all_reduce_h200x2.json": "## all_reduce, 2 rank(s)", "p2p_h200x2.json": "## p2p, 1 rank(s)",
                "route_2r.json": "## route, 2 rank(s)", "fetch_ipc_2r.json": "## fetch, 2 rank(s)"}

    @classmethod
    def setUpClass(cls):
        cls.out = tempfile.mkdtemp(prefix="atomr-report-json-")
        cls.result = run_report("--title", "json inputs", "-o", cls.out, *(data(f) for f in cls.FILES))
        cls.md = read(os.path.join(cls.out, "summary.md")) if cls.result.returncode == 0 else ""

    def test_it_runs(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.assertEqual(self.result.stderr, "")
        self.assertEqual([l for l in self.result.stdout.splitlines() if l.endswith(".svg")],
                         [f"atomr-report: wrote {self.out}/{s}.svg" for s in ("busbw", "time", "ratio", "many_small",
                                                                              "init")])

    def test_labels(self):
        sources = [l for l in self.md.splitlines() if l.startswith("- ")]
        self.assertEqual(sources, [f"- {label}: `{data(f)}`" for f in self.FILES for label in self.LABELS[f]])
        texts = svg_texts(os.path.join(self.out, "time.svg"))
        for f in self.FILES:
            for label in self.LABELS[f]:
                self.assertIn(label, texts)

    def test_labels_only_say_what_the_file_has(self):
        doc = load_json("fetch_ipc_2r.json")
        del doc["ranks"], doc["device"]  # as a file from before they were written
        host = load_json("fetch_ipc_2r.json")
        host.update(device="host", path="mpi_staged", machine="host CPU (vm)")
        route = load_json("route_2r.json")
        del route["machine"]
        d = tempfile.mkdtemp()
        paths = []
        for name, content in (("old.json", doc), ("host.json", host), ("route.json", route)):
            paths.append(os.path.join(d, name))
            with open(paths[-1], "w", encoding="utf-8") as f:
                json.dump(content, f)
        r = run_report("-o", os.path.join(d, "report"), "--meta", "machine=gpu-box", *paths)
        self.assertEqual(r.returncode, 0, r.stderr)
        md = read(os.path.join(d, "report", "summary.md"))
        self.assertEqual([l.split(":")[0] for l in md.splitlines() if l.startswith("- ")],
                         ["- atomr fetch cuda_ipc (NVIDIA H100 80GB HBM3 (vm), bfa940f)",
                          "- raw fetch cuda_ipc (NVIDIA H100 80GB HBM3 (vm), bfa940f)",
                          "- atomr fetch mpi_staged (2r host, host CPU (vm), bfa940f)",
                          "- raw fetch mpi_staged (2r host, host CPU (vm), bfa940f)",
                          "- atomr route (2r, gpu-box, bfa940f)", "- raw route (2r, gpu-box, bfa940f)"])
        self.assertIn("## fetch, 1 rank(s)", md)  # a file without ranks: one group of its own
        self.assertIn("## fetch, 2 rank(s)", md)

    def test_tables_match_the_files(self):
        for f in self.FILES[1:]:
            with self.subTest(file=f):
                doc = load_json(f)
                rows = table_rows(self.md, self.HEADINGS[f])
                self.assertEqual(len(rows), len(doc["rows"]))
                for cells, row in zip(rows, doc["rows"]):
                    gbps = [row.get("atomr_gbps"), row.get("raw_gbps")]
                    self.assertEqual(cells, [str(row["bytes"]), f"{row['atomr_us']:.2f}",
                                             "-" if gbps[0] is None else f"{gbps[0]:.2f}", f"{row['raw_us']:.2f}",
                                             "-" if gbps[1] is None else f"{gbps[1]:.2f}",
                                             f"{row['raw_us'] / row['atomr_us']:.3f}"])
        # fetch writes its own ratio (raw / atomr time): the table's is the same number
        for cells, row in zip(table_rows(self.md, self.HEADINGS["fetch_ipc_2r.json"]),
                              load_json("fetch_ipc_2r.json")["rows"]):
            self.assertEqual(cells[5], f"{row['ratio']:.3f}")
        # coll keeps its columns: atomr and raw out-of-place time and busbw, and its ratio
        doc = load_json("coll_all_reduce_h200x2.json")
        rows = table_rows(self.md, self.HEADINGS["coll_all_reduce_h200x2.json"])
        self.assertEqual(rows, [[str(r["size"]), f"{r['out_of_place']['time_us']:.2f}",
                                 f"{r['out_of_place']['busbw_gbps']:.2f}", f"{r['raw_out_of_place']['time_us']:.2f}",
                                 f"{r['raw_out_of_place']['busbw_gbps']:.2f}", f"{r['ratio']:.3f}"]
                                for r in doc["rows"]])

    def test_plot_series(self):
        n = {f: len(load_json(f)["rows"]) for f in self.FILES}
        time = svg_series(os.path.join(self.out, "time.svg"))
        self.assertEqual(time, {slug(label): n[f] for f in self.FILES for label in self.LABELS[f]})
        busbw = svg_series(os.path.join(self.out, "busbw.svg"))
        # route has no bandwidths (it measures round trips and message rates): not on this plot
        self.assertEqual(busbw, {slug(label): n[f] for f in self.FILES if f != "route_2r.json"
                                 for label in self.LABELS[f]})
        ratio = svg_series(os.path.join(self.out, "ratio.svg"))
        expected = {slug(self.LABELS[f][0] + ": own raw / atomr"): n[f] for f in self.FILES}
        expected["series-raw_speed"] = 0
        self.assertEqual(ratio, expected)


class Quickstart(unittest.TestCase):
    """launch/quickstart, in a copy of launch/ whose setup-deps, cmake and atomr-launch are stubs
    (the stub writes the stored coll JSON where -J says): the report is made and its folder
    printed whether quickstart chose the JSON's path or the caller did."""

    def setUp(self):
        launch = os.path.dirname(os.path.abspath(ARGS.script))
        self.root = tempfile.mkdtemp(prefix="atomr-quickstart-")
        os.makedirs(os.path.join(self.root, "launch"))
        os.makedirs(os.path.join(self.root, "stubs"))
        shutil.copy(os.path.join(launch, "quickstart"), os.path.join(self.root, "launch"))
        shutil.copy(ARGS.script, os.path.join(self.root, "launch", "atomr-report"))
        self.log = os.path.join(self.root, "launch.log")
        stubs = {
            "launch/setup-deps": "exit 0\n",
            "stubs/cmake": "exit 0\n",
            # Logs its arguments; for `bench`, writes the coll sample to -J's file as atomr would.
            "launch/atomr-launch": (
                f'echo "$*" >> {self.log}\n'
                'json=""; while [[ $# -gt 0 ]]; do\n'
                '  case $1 in -J|--output_file) json=$2; shift ;; --output_file=*) json=${1#*=} ;; -J?*) json=${1#-J} ;; esac\n'
                '  shift\n'
                'done\n'
                f'[[ -z $json ]] || cp {data("coll_all_reduce_h200x2.json")} "$json"\n'),
        }
        for path, body in stubs.items():
            full = os.path.join(self.root, path)
            with open(full, "w", encoding="utf-8") as f:
                f.write("#!/usr/bin/env bash\n" + body)
            os.chmod(full, os.stat(full).st_mode | stat.S_IXUSR)
        self.build = os.path.join(self.root, "build")

    def quickstart(self, *args):
        env = dict(os.environ, ATOMR_BUILD_DIR=self.build,
                   PATH=os.path.join(self.root, "stubs") + os.pathsep + os.environ["PATH"])
        r = subprocess.run([os.path.join(self.root, "launch", "quickstart"), *args], capture_output=True, text=True,
                           env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        report = os.path.join(self.build, "quickstart", "report")
        self.assertEqual(r.stdout.splitlines()[-1], f"quickstart: plots in {report} (busbw.png, time.png, ratio.png), "
                                                    f"table in {report}/summary.md")
        for name in ("busbw.png", "time.png", "ratio.png", "summary.md"):
            self.assertGreater(os.path.getsize(os.path.join(report, name)), 100, name)
        bench = [l for l in read(self.log).splitlines() if " bench coll " in l]
        self.assertEqual(len(bench), 1)
        # No atomr built with CUDA here (the build is a stub): the host backend, and it says so.
        self.assertIn("quickstart: no GPU for atomr here: 2 ranks on the host backend (MPI)", r.stdout)
        self.assertTrue(bench[0].startswith("-n 2 -g 0 "), bench[0])
        return read(os.path.join(report, "summary.md")), bench[0]

    def test_two_ranks_without_a_gpu_by_default(self):
        self.quickstart()
        self.assertTrue(read(self.log).splitlines()[0].endswith("/bin/atomr info"), read(self.log))

    def test_its_own_json(self):
        md, bench = self.quickstart("2")
        own = os.path.join(self.build, "quickstart", "coll.json")
        self.assertTrue(bench.endswith(f"bench coll all_reduce -b 8 -e 64M -f 4 --host -J {own}"), bench)
        self.assertIn(f"- atomr all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea): `{own}`", md)

    def test_the_callers_json(self):
        mine = os.path.join(self.root, "mine")
        os.makedirs(mine)
        for form in (["-J", f"{mine}/a.json"], [f"-J{mine}/b.json"], ["--output_file", f"{mine}/c.json"],
                     [f"--output_file={mine}/d.json"]):
            with self.subTest(form=form):
                path = os.path.join(mine, form[-1].rpartition("/")[2])
                md, bench = self.quickstart("2", "all_reduce", "-b", "8", *form, "-e", "1M")
                self.assertTrue(bench.endswith(" bench coll all_reduce -b 8 " + " ".join(form) + " -e 1M --host"), bench)
                self.assertIn(f"- atomr all_reduce (2r nccl, NVIDIA H200 (vm), 0b2a7ea): `{path}`", md)
                rows = table_rows(md, "## all_reduce, 2 rank(s)")
                self.assertEqual([int(r[0]) for r in rows], [8, 512, 32768, 2097152])
                os.remove(self.log)
        self.assertFalse(os.path.exists(os.path.join(self.build, "quickstart", "coll.json")))


def doctor_report():
    """An `atomr doctor -J` report of 3 ranks on 2 nodes: pair 0<->2 is the outlier of its class."""
    def pair(a, b, cls, gbps, reference, outlier):
        return {"a": a, "b": b, "class": cls, "gbps_ab": gbps, "gbps_ba": gbps * 1.1, "link_gbps": gbps,
                "reference_gbps": reference, "outlier": outlier, "failure": ""}
    return {"doctor": 1, "ranks": 3, "nodes": 2, "fraction": 0.6,
            "rank_results": [{"rank": 0, "hostname": "n1"}, {"rank": 1, "hostname": "n1"},
                             {"rank": 2, "hostname": "n2"}],
            "pairs": [pair(0, 1, "MPI over shared memory", 5.0, 5.0, False),
                      pair(0, 2, "MPI over the network", 0.5, 2.0, True),
                      pair(1, 2, "MPI over the network", 2.0, 2.0, False)],
            "findings": [{"text": "pair 0<->2: 0.5 GB/s, 25 % of the healthy level of its class"}]}


class Doctor(unittest.TestCase):
    """--doctor: the heatmap marks the outlier's two cells; the bars are the pairs' GB/s in order."""

    def draw(self, doc):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        out = tempfile.mkdtemp()
        return run_report("--doctor", f.name, "-o", out), out

    def test_the_plots(self):
        r, out = self.draw(doctor_report())
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in ("doctor_pairs", "doctor_bars"):
            for ext in ("png", "svg"):
                self.assertTrue(os.path.getsize(os.path.join(out, f"{name}.{ext}")) > 0, name + ext)
        heat = svg_texts(os.path.join(out, "doctor_pairs.svg"))
        for label in ("0 n1", "1 n1", "2 n2", "fetcher", "owner"):
            self.assertIn(label, heat)
        self.assertTrue(any("3 ranks, 2 nodes" in t for t in heat), heat)
        # The outlier's two cells are outlined in red: two rectangles of that stroke.
        root = ET.parse(os.path.join(out, "doctor_pairs.svg")).getroot()
        red = [e for e in root.iter() if "stroke: #ff0000" in (e.get("style") or "")]
        self.assertEqual(len(red), 2, [e.get("style") for e in red])
        bars = svg_texts(os.path.join(out, "doctor_bars.svg"))
        self.assertEqual([t for t in bars if "<->" in t], ["0<->1", "0<->2", "1<->2"])
        self.assertTrue(any("60 % of it" in t for t in bars), bars)

    def test_not_a_doctor_report(self):
        r, out = self.draw({"benchmark": "coll", "rows": []})
        assert_one_line_error(self, r, r"not an atomr doctor report")
        self.assertEqual(os.listdir(out), [])

    def test_a_report_without_pairs(self):
        doc = doctor_report()
        doc["pairs"] = []
        r, out = self.draw(doc)
        assert_one_line_error(self, r, r"a report without pairs \(3 rank\(s\)\); nothing to draw")
        self.assertEqual(os.listdir(out), [])


class Performance(unittest.TestCase):
    """--performance on a small fixture: one machine folder with a coll, a route and a fetch file
    and their commands; the page names the hardware and command of each table and holds the
    files' numbers. Then the errors: a JSON file not listed, a listed one missing."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="atomr-performance-")
        self.machine = os.path.join(self.root, "box")
        os.makedirs(self.machine)
        shutil.copy(data("coll_all_reduce_h200x2.json"), os.path.join(self.machine, "small.json"))
        shutil.copy(data("fetch_ipc_2r.json"), os.path.join(self.machine, "fetch.json"))
        self.meta = {"title": "Two test GPUs", "hardware": "2x Test GPU, NV4", "software": "NCCL 9.9.9",
                     "commands": {"small": "mpirun -np 2 atomr bench coll all_reduce -b 8 -e 2M -f 64",
                                  "fetch": "mpirun -np 2 atomr bench fetch"}}
        self.write_meta()

    def tearDown(self):
        shutil.rmtree(self.root)

    def write_meta(self):
        with open(os.path.join(self.machine, "machine.json"), "w", encoding="utf-8") as f:
            json.dump(self.meta, f)

    def test_the_page(self):
        r = run_report("--performance", self.root)
        self.assertEqual(r.returncode, 0, r.stderr)
        page = r.stdout
        self.assertIn("## Two test GPUs\n", page)
        self.assertIn("- Hardware: 2x Test GPU, NV4\n", page)
        self.assertIn("- Software: NCCL 9.9.9\n", page)
        self.assertIn("```\nmpirun -np 2 atomr bench coll all_reduce -b 8 -e 2M -f 64\n```", page)
        self.assertIn("```\nmpirun -np 2 atomr bench fetch\n```", page)
        coll = load_json("coll_all_reduce_h200x2.json")
        first = coll["rows"][0]
        a, b = first["out_of_place"]["time_us"], first["raw_out_of_place"]["time_us"]
        self.assertIn(f"| 8 B | {a:.2f} | {b:.2f} | {a - b:+.2f} | {first['ratio']:.2f} |", page)
        fetch = load_json("fetch_ipc_2r.json")
        row = fetch["rows"][-1]
        self.assertIn(f" | {row['atomr_us']:.2f} | {row['raw_us']:.2f} | ", page)
        self.assertIn("path cuda_ipc", page)
        self.assertLess(page.index("(`small.json`)"), page.index("(`fetch.json`)"))  # machine.json's order
        out = os.path.join(self.root, "page.md")
        r = run_report("--performance", self.root, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read(out), page)

    def test_a_file_not_listed(self):
        shutil.copy(data("route_2r.json"), os.path.join(self.machine, "route.json"))
        r = run_report("--performance", self.root)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stderr, f"atomr-report: error: {self.machine}: route not listed in machine.json's commands\n")

    def test_a_listed_file_missing(self):
        self.meta["commands"]["gone"] = "atomr bench coll"
        self.write_meta()
        r = run_report("--performance", self.root)
        self.assertEqual(r.returncode, 2)
        self.assertIn("gone.json", r.stderr)


class PerformancePage(unittest.TestCase):
    """docs/performance.md is what the generator makes of docs/results: it cannot drift from the
    JSON. (Regenerate: launch/atomr-report --performance docs/results -o docs/performance.md.)"""

    def test_it_matches_the_results(self):
        r = run_report("--performance", ARGS.results)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, read(ARGS.page),
                         "docs/performance.md is out of date: run launch/atomr-report --performance docs/results "
                         "-o docs/performance.md")


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
    p.add_argument("--results", help="docs/results, for PerformancePage")
    p.add_argument("--page", help="docs/performance.md, for PerformancePage")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)
