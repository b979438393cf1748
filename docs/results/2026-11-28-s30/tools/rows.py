#!/usr/bin/env python3
"""Item 2's small and large rows from a call's bench coll JSON files (json.tar.gz, extracted).

small_*.json and g2_*.json: every cell (size, in place or not) as atomr - raw in us; counts the
cells over raw + 1.5 us. large_*.json: raw/atomr from 16 MiB and from 64 MiB (the lowest).
Usage: rows.py <dir>
"""
import glob
import json
import os
import sys

d = sys.argv[1]
over, cells, wrong = 0, 0, 0
diffs = []
for p in sorted(glob.glob(os.path.join(d, "small_*.json")) + glob.glob(os.path.join(d, "g2_*.json"))):
    doc = json.load(open(p))
    wrong += doc.get("wrong", 0)
    worst = None
    for row in doc["rows"]:
        if row["size"] > (1 << 20):
            continue
        for mode in ("out_of_place", "in_place"):
            raw = row.get("raw_" + mode)
            if raw is None or mode not in row or row[mode]["time_us"] <= 0:
                continue
            diff = row[mode]["time_us"] - raw["time_us"]
            diffs.append(diff)
            cells += 1
            over += diff > 1.5
            if worst is None or diff > worst[0]:
                worst = (diff, row["size"], mode)
    print(f"{os.path.basename(p):28s} largest {worst[0]:+6.2f} us ({worst[1]} B, {worst[2]})")
diffs.sort()
if diffs:
    print(f"small: {over} of {cells} cells over raw + 1.5 us; median {diffs[len(diffs) // 2]:+.2f}, largest {diffs[-1]:+.2f}; wrong {wrong}")
for p in sorted(glob.glob(os.path.join(d, "large_*.json"))):
    doc = json.load(open(p))
    lo16 = lo64 = 9.0
    for row in doc["rows"]:
        for mode in ("out_of_place", "in_place"):
            raw = row.get("raw_" + mode)
            if raw is None or mode not in row or row[mode]["time_us"] <= 0:
                continue
            ratio = raw["time_us"] / row[mode]["time_us"]
            if row["size"] >= 16 << 20:
                lo16 = min(lo16, ratio)
            if row["size"] >= 64 << 20:
                lo64 = min(lo64, ratio)
    print(f"{os.path.basename(p):28s} raw/atomr from 16 MiB >= {lo16:.3f}, from 64 MiB >= {lo64:.3f}; wrong {doc.get('wrong', 0)}")
