#!/usr/bin/env bash
# Session 15, call 7 (nvidia-h200-x2): nccl_path_probe (ATOMR_PROBE_MODES=short) under NCCL
# settings that may shorten NCCL's eager host path, two runs each: what a communicator made for
# small collectives could set.
set -uo pipefail
root=$PWD; st=$root/.gpu-stage; out=$OUT/c7; mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$st/lib ATOMR_PROBE_MODES=short
{ echo "commit: $(cat $st/COMMIT) date: $(date -u +%FT%TZ) host: $(hostname)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv; nproc; } > $out/machine.txt 2>&1
log=$out/c7.log
r() { local name=$1 t=$2; shift 2; echo "=== $name: $*" >> $log; timeout $t "$@" >> $log 2>&1; echo "rc=$?" >> $log; }
for i in 1 2; do
  for v in "" NCCL_MAX_NCHANNELS=1 NCCL_MAX_CTAS=1 NCCL_PROTO=LL NCCL_ALGO=Ring NCCL_GRAPH_MIXING_SUPPORT=0 NCCL_RUNTIME_CONNECT=0; do
    name=${v%%=*}; name=${name:-default}
    envs=(); [[ -n $v ]] && envs=(-x "$v")
    r ${name}_$i 120 mpirun --bind-to none -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x ATOMR_PROBE_MODES "${envs[@]}" -np 2 $st/bin/nccl_path_probe 5000
  done
done
python3 - "$log" <<'PY'
import re, sys, collections
d = collections.defaultdict(lambda: collections.defaultdict(lambda: ([], [])))
cur = None
for line in open(sys.argv[1]):
    if line.startswith("=== "):
        cur = line.split(":")[0][4:].rsplit("_", 1)[0]
    m = re.match(r"round \d (\S+)\s+back to back\s+([\d.]+) us\s+each waited for\s+([\d.]+)", line)
    if m and cur:
        d[cur][m.group(1)][0].append(float(m.group(2)))
        d[cur][m.group(1)][1].append(float(m.group(3)))
for v, modes in d.items():
    for mode in ("malloc", "graph"):
        a, b = modes[mode]
        if a:
            a.sort(); b.sort()
            print(f"{v:28s} {mode:7s} b2b {a[0]:6.2f}-{a[-1]:6.2f} (med {a[len(a)//2]:6.2f})  waited {b[0]:6.2f}-{b[-1]:6.2f} (med {b[len(b)//2]:6.2f})")
PY
grep -E "^rc=[1-9]" $log
