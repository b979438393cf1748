#!/usr/bin/env python3
"""Gaps between consecutive NCCL/MPI calls in an ATOMR_TRACE file (last N requests)."""
import json, sys, statistics, collections
path = sys.argv[1]; last = int(sys.argv[2]) if len(sys.argv) > 2 else 1500
d = json.load(open(path)); ev = d['traceEvents'] if isinstance(d, dict) else d
by = collections.defaultdict(dict)
for e in ev:
    if e.get('ph') != 'X': continue
    by[e['args']['seq']][e['name']] = (e['ts'], e['dur'], e.get('tid'))
seqs = sorted(s for s in by if 'NCCL/MPI call' in by[s])[-last:]
calls = [(by[s]['NCCL/MPI call'], s) for s in seqs]
gaps, durs, big = [], [], []
for (a, sa), (b, sb) in zip(calls, calls[1:]):
    end = a[0] + a[1]
    g = b[0] - end
    if g < 0: continue  # same batch (packed/grouped) or overlap
    gaps.append(g); durs.append(b[1])
    if g > 5: big.append((g, sb, {k: round(v[1], 2) for k, v in by[sb].items()}, a[2] == b[2]))
span = calls[-1][0][0] + calls[-1][0][1] - calls[0][0][0]
q = lambda xs, p: sorted(xs)[int(p * (len(xs) - 1))] if xs else float('nan')
print(f"{path}: {len(calls)} calls over {span:.0f} us = {span/len(calls):.2f} us/call; call dur median {statistics.median(durs):.2f}"
      f" mean {statistics.mean(durs):.2f}; gap median {statistics.median(gaps):.2f} mean {statistics.mean(gaps):.2f}"
      f" p90 {q(gaps,.9):.2f} p99 {q(gaps,.99):.2f}; gaps>5us: {len(big)} summing {sum(g for g,*_ in big):.0f} us")
tids = collections.Counter(by[s]['NCCL/MPI call'][2] for s in seqs); print("issuing threads:", dict(tids))
for g, s, st, same in sorted(big, reverse=True)[:8]: print(f"  gap {g:.1f} before seq {s} same-thread {same}: {st}")
