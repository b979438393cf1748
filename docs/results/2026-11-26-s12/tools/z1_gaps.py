#!/usr/bin/env python3
"""Each waited-for request of an ATOMR_TRACE file (-z 1): its stages, and the caller's time
between one request's resolving and the next one's submission (outside every stage)."""
import json, sys, statistics, collections
path = sys.argv[1]; last = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
d = json.load(open(path)); ev = d['traceEvents'] if isinstance(d, dict) else d
by = collections.defaultdict(dict)
for e in ev:
    if e.get('ph') != 'X': continue
    by[e['args']['seq']][e['name']] = (e['ts'], e['dur'])
seqs = sorted(s for s in by if 'resolve future' in by[s] and 'hand-off' in by[s])[-last:]
q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))] if xs else float('nan')
def show(name, xs):
    print(f"  {name:22s} n {len(xs):5d} median {statistics.median(xs):7.2f} mean {statistics.mean(xs):7.2f} "
          f"p90 {q(xs,.9):7.2f} p99 {q(xs,.99):8.2f} max {max(xs):9.2f} sum {sum(xs):9.0f}")
print(path)
stages = collections.defaultdict(list); total, outside, cycle = [], [], []
for a, b in zip(seqs, seqs[1:]):
    if b != a + 1: continue
    A, B = by[a], by[b]
    start = A['hand-off'][0]; end = A['resolve future'][0] + A['resolve future'][1]
    total.append(end - start); outside.append(B['hand-off'][0] - end); cycle.append(B['hand-off'][0] - start)
    for k, v in A.items(): stages[k].append(v[1])
show("cycle (submit to next)", cycle); show("submitted..resolved", total); show("outside (caller)", outside)
for k, v in stages.items(): show(k, v)
