#!/usr/bin/env bash
# bench/run-fence.sh: how long a failed node's jobs take to run again
# elsewhere, and how long the old processes ran beside the new attempt.
# Real node failures on the local provider (bench/fence_scenario.sh: real
# agents, one killed with -9, its job process left running; a single-node
# job and a 2-node gang), REPS times each, against a PostgreSQL started
# here; prints a markdown table of medians and writes it to
# bench/results/fence-<date>.md.
#
#   bench/run-fence.sh [REPORT.md]
#
# Environment: BUILD (default build; another build's tarmac, e.g. main's,
# gives the before figures), REPS (3).  Not a ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
REPS=${REPS:-3}
OUT=${1:-$ROOT/bench/results/fence-$(date -u +%Y-%m-%d).md}
[ -x "$BUILD/tarmac" ] || { echo "run-fence: build first ($BUILD/tarmac missing)" >&2; exit 2; }
S=$(mktemp -d /tmp/tm-bench-fence.XXXXXX)
trap '"$ROOT/tests/lib/pg_cluster.sh" stop "$S" >/dev/null 2>&1 || true; rm -rf "$S"' EXIT
"$ROOT/tests/lib/pg_cluster.sh" start "$S" >/dev/null
export TM_TEST_STATE=$S TM_SOURCE_DIR=$ROOT TM_BINARY_DIR=$BUILD TM_BIN=$BUILD/tarmac
for kind in single gang; do
    for i in $(seq "$REPS"); do
        bash "$ROOT/bench/fence_scenario.sh" "$kind" 2>/dev/null | grep '^result' || echo "result kind=$kind failed"
    done
done | tee "$S/results"
python3 - "$S/results" "$BUILD/tarmac" "$REPS" >"$OUT" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = dict(kv.split("=") for kv in line.split()[1:])
    if "run_again_ms" in f:
        rows.setdefault(f["kind"], []).append(f)
print("# Fencing: a failed node's jobs running again (bench/run-fence.sh)\n")
print("Binary: %s; %s runs per kind; local provider, agent killed -9, job process left running;" % (sys.argv[2], sys.argv[3]))
print("unreachable_after 3s, requeue_after 5s, terminate_after 30s, idle_grace 60s.\n")
print("| kind | runs | run again after (median ms) | old process gone after (median ms) | ran beside the next attempt (median ms) | runs with overlap |")
print("|---|---|---|---|---|---|")
for kind, rs in rows.items():
    med = lambda k: statistics.median(int(r[k]) for r in rs)
    print("| %s | %d | %d | %d | %d | %d |" % (kind, len(rs), med("run_again_ms"), med("old_gone_ms"),
                                             med("overlap_ms"), sum(int(r["overlap_ms"]) > 0 for r in rs)))
PY
cat "$OUT"
