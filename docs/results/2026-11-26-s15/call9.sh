#!/usr/bin/env bash
# Session 15, call 9 (nvidia-h200-x2): nccl_path_probe short modes with graph_agree (a graph
# launch after an 8-byte MPI_Allreduce among the ranks) and agree (that MPI_Allreduce alone),
# four runs: what a graph keyed by the caller's buffers would cost with an agreement per launch.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c9; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib ATOMR_PROBE_MODES=short
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
log=$out/c9.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2 3 4; do r probe_$i 120 mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_PROBE_MODES -np 2 $st/bin/nccl_path_probe 5000; done
grep -E "^rc=[1-9]|disagreed" $log
python3 - "$log" <<'PY'
import re, sys, collections
d = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    m = re.match(r"round \d (\S+)\s+back to back\s+([\d.]+) us\s+each waited for\s+([\d.]+)", line)
    if m:
        d[m.group(1)][0].append(float(m.group(2))); d[m.group(1)][1].append(float(m.group(3)))
for v, (a, b) in d.items():
    a.sort(); b.sort()
    print(f"{v:16s} b2b {a[0]:6.2f}-{a[-1]:6.2f} (med {a[len(a)//2]:6.2f})  waited {b[0]:6.2f}-{b[-1]:6.2f} (med {b[len(b)//2]:6.2f})  n={len(a)}")
PY
true
