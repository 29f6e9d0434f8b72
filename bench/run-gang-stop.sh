#!/usr/bin/env bash
# bench/run-gang-stop.sh: gang stop skew, from the first rank's stop signal
# to the last's, over GANGS cancelled gangs of SIZE nodes on the local
# provider (real agents, bench/gang_stop_scenario.sh), against a
# PostgreSQL started here; prints a markdown table (median, p90, max) and
# writes it to bench/results/gang-stop-<date>.md (or REPORT.md).
#
#   bench/run-gang-stop.sh [REPORT.md]
#
# Environment: BUILD (default build; another build's tarmac, e.g. main's,
# gives the before figures), GANGS (20), SIZE (4), HEARTBEAT (the agents'
# --heartbeat-period, default 10s as the agent's own default).  The
# agents' heartbeats are spread over the period before each stop.  Not a
# ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
GANGS=${GANGS:-20}
SIZE=${SIZE:-4}
export HEARTBEAT=${HEARTBEAT:-10s}
OUT=${1:-$ROOT/bench/results/gang-stop-$(date -u +%Y-%m-%d).md}
[ -x "$BUILD/tarmac" ] || { echo "run-gang-stop: build first ($BUILD/tarmac missing)" >&2; exit 2; }
S=$(mktemp -d /tmp/tm-bench-gang-stop.XXXXXX)
trap '"$ROOT/tests/lib/pg_cluster.sh" stop "$S" >/dev/null 2>&1 || true; rm -rf "$S"' EXIT
"$ROOT/tests/lib/pg_cluster.sh" start "$S" >/dev/null
export TM_TEST_STATE=$S TM_SOURCE_DIR=$ROOT TM_BINARY_DIR=$BUILD TM_BIN=$BUILD/tarmac
bash "$ROOT/bench/gang_stop_scenario.sh" "$GANGS" "$SIZE" 2>"$S/scenario.err" | grep '^result' | tee "$S/results" \
    || { tail -20 "$S/scenario.err" >&2; exit 1; }
python3 - "$S/results" "$BUILD/tarmac" "$GANGS" "$SIZE" "$HEARTBEAT" >"$OUT" <<'PY'
import statistics, sys
skews = [int(line.split("skew_ms=")[1]) for line in open(sys.argv[1])]
ok = sorted(s for s in skews if s >= 0)
def pct(p):
    return ok[min(len(ok) - 1, int(round(p * (len(ok) - 1))))] if ok else -1
print("# Gang stop skew (bench/run-gang-stop.sh)\n")
print("Binary: %s; %s cancelled gangs of %s nodes, local provider, agents' heartbeat period %s," % tuple(sys.argv[2:6]))
print("agents' heartbeats spread over the period before each cancel;")
print("skew: the first rank's stop signal (SIGTERM, the checkpoint signal) to the last's.\n")
print("| gangs | every rank signalled | median (ms) | p90 (ms) | max (ms) |")
print("|---|---|---|---|---|")
print("| %d | %d | %d | %d | %d |" % (len(skews), len(ok), statistics.median(ok) if ok else -1, pct(0.9),
                                      ok[-1] if ok else -1))
PY
cat "$OUT"
