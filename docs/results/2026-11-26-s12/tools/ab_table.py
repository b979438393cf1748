#!/usr/bin/env python3
"""Per run of a bench coll log: atomr - raw (us) over the small rows, out of place / in place."""
import re, sys, statistics
name = None; rows = {}
for line in open(sys.argv[1]):
    m = re.match(r"=== (\S+):", line)
    if m: name = m.group(1); rows[name] = []; continue
    f = line.split()
    if name and len(f) >= 18 and f[0].isdigit() and not line.startswith('#'):
        if f[2] == "f32" and "n/a" not in (f[5], f[13]):
            size = int(f[0]); ao, ro = float(f[5]), float(f[13])
            if f[9] == 'n/a': rows[name].append((size, ao - ro))
            else: rows[name].append((size, ao - ro, float(f[9]) - float(f[15])))
    m2 = re.search(r"in one submit_all call ([\d.]+) us", line)
    if m2 and name: rows[name].append(('many', float(m2.group(1))))
for n, rs in rows.items():
    small = [r for r in rs if r[0] != 'many' and r[0] <= 1 << 20]
    many = [r[1] for r in rs if r[0] == 'many']
    if small:
        d = [x for r in small for x in r[1:]]
        print(f"{n:28s} diff min {min(d):+6.2f} med {statistics.median(d):+6.2f} max {max(d):+6.2f}  8B {'/'.join(f'{x:+.2f}' for x in small[0][1:])}" + (f"  many-one-call {many[0]:.0f} us" if many else ""))
