#!/usr/bin/env bash
# bench/run-agent.sh: what `tarmac agent` costs its node.  One agent with 8
# fake GPUs sampling every second (heartbeats every 10 s carry the batch),
# beside a baseline: the same binary and options with no GPUs (nothing to
# sample, the same heartbeats), both against one loopback stub of the
# controller's routes (tests/unit/agent/stub_controller.py) for the same
# DURATION, so machine noise falls on both alike.  Every second the script
# reads each agent's utime+stime and VmRSS from /proc; it prints CPU as a
# percentage of one core over the run, and peak and median RSS, as a
# markdown table, and writes the report to bench/results/agent-<date>.md.
#
#   bench/run-agent.sh [REPORT.md]
#
# Environment: BUILD (default build), DURATION seconds (300), GPUS (8),
# SAMPLE (1s), HEARTBEAT (10s).  Not a ctest test.
# The anchor: NVIDIA's dcgm-exporter samples every 30 s by default; the aim
# is under 1% of a core and under 20 MB at a 1 s sample period.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
DURATION=${DURATION:-300}
GPUS=${GPUS:-8}
SAMPLE=${SAMPLE:-1s}
HEARTBEAT=${HEARTBEAT:-10s}
OUT=${1:-$ROOT/bench/results/agent-$(date -u +%Y-%m-%d).md}
TARMAC=$BUILD/tarmac
PY=$(command -v /usr/bin/python3 || command -v python3)
[ -x "$TARMAC" ] || { echo "run-agent: build first ($TARMAC missing)" >&2; exit 2; }

T=$(mktemp -d /tmp/tm-bench-agent.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$T"
}
trap cleanup EXIT

"$PY" "$ROOT/tests/unit/agent/stub_controller.py" --port-file "$T/port" --record "$T/rec.jsonl" \
    --heartbeat-record /dev/null --quiet-record &
pids+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
URL="http://127.0.0.1:$(cat "$T/port")"

"$PY" - "$GPUS" "$T/fake8.json" <<'PY'
import json, sys
n = int(sys.argv[1])
gpus = [{"uuid": "GPU-bench-%d" % i, "name": "Fake A100", "util_percent": 10 * (i % 10),
         "memory_used_mib": 1024 * i, "memory_total_mib": 81920, "temperature_c": 40 + i,
         "power_w": 100 + 10 * i} for i in range(n)]
json.dump({"gpus": gpus}, open(sys.argv[2], "w"))
PY
echo '{"gpus":[]}' >"$T/fake0.json"
echo enroll-secret-xyz >"$T/secret"

start() { # name fake-file
    "$TARMAC" agent --controller "$URL" --node-id 1 --work-dir "$T/$1" --enroll-secret-file "$T/secret" \
        --gpu-fake "$2" --sample-period "$SAMPLE" --heartbeat-period "$HEARTBEAT" \
        --log-level warn >"$T/$1.log" 2>&1 &
    pids+=($!)
    echo $! >"$T/$1.pid"
}
start loaded "$T/fake8.json"
start idle "$T/fake0.json"
sleep 2 # enrolled, first heartbeat sent: measure the steady state

"$PY" - "$(cat "$T/loaded.pid")" "$(cat "$T/idle.pid")" "$DURATION" "$T/table.md" <<'PY'
import os, statistics, sys, time
pids = {"loaded": int(sys.argv[1]), "idle": int(sys.argv[2])}
duration = int(sys.argv[3])
tick = os.sysconf("SC_CLK_TCK")

def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # utime, stime (fields 14, 15)

def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

start = {k: cpu(p) for k, p in pids.items()}
rss = {k: [] for k in pids}
t0 = time.monotonic()
while time.monotonic() - t0 < duration:
    for k, p in pids.items():
        rss[k].append(rss_kb(p))
    time.sleep(1)
wall = time.monotonic() - t0
rows = []
for k, p in pids.items():
    used = (cpu(p) - start[k]) / tick
    rows.append((k, 100.0 * used / wall, max(rss[k]) / 1024.0, statistics.median(rss[k]) / 1024.0, used))
with open(sys.argv[4], "w") as f:
    f.write("| agent | CPU % of a core | peak RSS MB | median RSS MB | CPU s used |\n")
    f.write("| --- | ---: | ---: | ---: | ---: |\n")
    for k, c, peak, med, used in rows:
        f.write("| %s | %.3f | %.1f | %.1f | %.2f |\n" % (k, c, peak, med, used))
    f.write("\nwall %.0f s; loaded = 8 fake GPUs sampled every second, idle = the same agent with no GPUs\n" % wall)
PY

n_hb=$(grep -c heartbeat "$T/rec.jsonl" 2>/dev/null || echo 0)
{
    echo "# tarmac agent: CPU and memory on the node ($(date -u +%Y-%m-%dT%H:%MZ))"
    echo
    echo "\`DURATION=$DURATION GPUS=$GPUS SAMPLE=$SAMPLE HEARTBEAT=$HEARTBEAT bench/run-agent.sh\`"
    echo "on $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(uname -sr)."
    echo
    cat "$T/table.md"
    echo
    echo "Aim: under 1% of a core and under 20 MB with 8 GPUs sampled every second."
    echo "Anchor: dcgm-exporter samples every 30 s by default."
    echo "Agent warnings during the run: $(cat "$T/loaded.log" "$T/idle.log" | grep -vc cgroup || true)."
} | tee "$OUT"
