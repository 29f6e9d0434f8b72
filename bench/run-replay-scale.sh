#!/bin/sh
# bench/run-replay-scale.sh: how the time replay grows with the trace
#: `tarmac replay --synthetic N --gpus 4096 --load 1.1
# --policy P` for N = 125,000, 250,000, 500,000, 1,000,000 and P = fifo,
# backfill, tarmac, one core each (the replay is single-threaded); prints a
# markdown table of wall and user CPU seconds and the growth per doubling
# (n log n would be about 2.1x).  At load 1.1 the backlog deepens with the
# trace (mean wait 7,915 s at 500,000 jobs, 18,415 s at 1,000,000), so each
# pass has more aged jobs to reserve for; LOAD=0.9 measures the replay
# with a queue that stays shallow.  A run past LIMIT seconds of CPU time
# (default 600; ulimit -t, so a shared machine's waits do not count) is
# stopped and the larger sizes of that policy are not tried.
#
#   bench/run-replay-scale.sh [REPORT.md]
#
# Environment: BUILD (build folder, default build-bench), LIMIT, SIZES,
# POLICIES, LOAD (default 1.1).  Not a ctest test.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
LIMIT=${LIMIT:-600}
SIZES=${SIZES:-125000 250000 500000 1000000}
POLICIES=${POLICIES:-fifo backfill tarmac}
LOAD=${LOAD:-1.1}
OUT=${1:-}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 tarmac >/dev/null
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

report() {
    echo "# Replay at scale"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: \`tarmac replay --synthetic N --gpus 4096 --load $LOAD --policy P\` (build: Release), stopped after $LIMIT s of CPU"
    echo "- user s is CPU time (the replay runs on one core); wall s includes waiting for a shared CPU"
    echo
    echo "| policy | jobs | wall s | user s | user growth vs half the jobs | events/s |"
    echo "|---|---:|---:|---:|---:|---:|"
    for p in $POLICIES; do
        prev=""
        for n in $SIZES; do
            if (ulimit -t "$LIMIT"; exec /usr/bin/time -f "%e %U" -o "$TMP/time" "$BUILD/tarmac" replay \
                --synthetic "$n" --gpus 4096 --load "$LOAD" --policy "$p" >"$TMP/out" 2>&1); then
                set -- $(cat "$TMP/time")
                eps=$(grep -m1 "^| $p " "$TMP/out" | awk -F'|' '{gsub(/ /, "", $(NF-1)); print $(NF-1)}')
                g=$( [ -n "$prev" ] && awk "BEGIN { printf \"%.2fx\", $2 / $prev }" || echo "-")
                echo "| $p | $n | $1 | $2 | $g | $eps |"
                prev=$2
            else
                echo "| $p | $n | - | > $LIMIT (stopped) | - | - |"
                break
            fi
        done
    done
}

if [ -n "$OUT" ]; then
    report | tee "$OUT"
else
    report
fi
