#!/usr/bin/env bash
# Session 15, call 8 (nvidia-h200-x2): NCCL_GRAPH_MIXING_SUPPORT=0 against the default, taking
# turns: nccl_path_probe (short modes) four runs each, and bench coll all_reduce back to back and
# -z 1 two rounds each (both columns run under the setting).
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c8; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib ATOMR_PROBE_MODES=short
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
log=$out/c8.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
mp=(mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_PROBE_MODES)
for i in 1 2 3 4; do
  r probe_default_$i 120 "${mp[@]}" -np 2 $st/bin/nccl_path_probe 5000
  r probe_nomix_$i 120 "${mp[@]}" -x NCCL_GRAPH_MIXING_SUPPORT=0 -np 2 $st/bin/nccl_path_probe 5000
done
for i in 1 2; do
  for z in 0 1; do
    r ar_z${z}_default_$i 60 "${mp[@]}" -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
    r ar_z${z}_nomix_$i 60 "${mp[@]}" -x NCCL_GRAPH_MIXING_SUPPORT=0 -np 2 $st/bin/atomr bench coll all_reduce -b 8 -e 1M -f 8 -n 2000 -w 100 --many 0 -z $z
  done
done
python3 - "$log" <<'PY'
import re, sys, collections
d = collections.defaultdict(lambda: ([], []))
cur = None
for line in open(sys.argv[1]):
    if line.startswith("=== probe"):
        cur = line.split(":")[0][4:].rsplit("_", 1)[0]
    elif line.startswith("=== "):
        cur = None
    m = re.match(r"round \d (malloc)\s+back to back\s+([\d.]+) us\s+each waited for\s+([\d.]+)", line)
    if m and cur:
        d[cur][0].append(float(m.group(2))); d[cur][1].append(float(m.group(3)))
for v, (a, b) in d.items():
    a.sort(); b.sort()
    print(f"{v:16s} eager b2b {a[0]:6.2f}-{a[-1]:6.2f} (med {a[len(a)//2]:6.2f})  waited {b[0]:6.2f}-{b[-1]:6.2f} (med {b[len(b)//2]:6.2f})  n={len(a)}")
PY
python3 $root/.gpu-tools/ab_table.py $log
awk '/^=== ar_/{n=$2} /^ +8 +2 +f32/{print n, $0}' $log
true
