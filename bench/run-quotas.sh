#!/bin/sh
# bench/run-quotas.sh: teams sharing the fleet on Philly's job file (a team,
# its virtual cluster, on every job): quotas in proportion to each team's
# GPU-hours of a fleet of 48 nodes of 8 GPUs (--gpus 384), replayed under
# strict-quota, shared, fairshare and tarmac in one process.  Prints the
# table per policy and per team and each target beside its figure, and
# writes them to REPORT.md when given.
#
#   bench/run-quotas.sh [REPORT.md]
#
# Environment: BUILD (default build-bench, a Release build), TRACES (the
# folder holding philly-pollux/), BORROWERS (checkpointable, the default,
# or preemptible), FROM_JSON (the --json output of that same command, saved
# earlier: reported without replaying).  Not a ctest test: four replays of 82,247 jobs, the
# whole queue at every pass for three of them (minutes each).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
TRACES=${TRACES:-$ROOT/../shared/traces}
BORROWERS=${BORROWERS:-checkpointable}
OUT=${1:-}
PHILLY="$TRACES/philly-pollux/philly.csv"
JSON=$(mktemp)
trap 'rm -f "$JSON"' EXIT

CMD="tarmac replay --pods philly.csv --gpus 384 --quotas proportional --borrowers $BORROWERS --json"
if [ -n "${FROM_JSON:-}" ]; then
    cp "$FROM_JSON" "$JSON"
else
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    make -C "$BUILD" -j2 tarmac >/dev/null
    "$BUILD/tarmac" replay --pods "$PHILLY" --gpus 384 --quotas proportional --borrowers "$BORROWERS" \
        --json >"$JSON"
fi

report() {
    echo "# Team quotas on Philly: strict, shared, fair share, tarmac"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: bench/run-quotas.sh (build: Release), i.e. \`$CMD\`"
    python3 "$ROOT/bench/quota_targets.py" "$JSON" "$BORROWERS"
}
if [ -n "$OUT" ]; then
    report | tee "$OUT"
else
    report
fi
