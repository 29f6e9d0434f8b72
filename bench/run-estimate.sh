#!/bin/sh
# bench/run-estimate.sh: the runtime predictor before and after its
# fallback model, on the openb traces: reservation slips
# (how often a reserved job starts after the start it was promised, and by
# how much) and the estimates' mean absolute log error.  Prints markdown.
#
#   bench/run-estimate.sh [REPORT.md]
#
# Environment as bench/run-scheduler.sh (BUILD, TRACES).  Not a ctest test:
# 72 replays, a few minutes.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
TRACES=${TRACES:-$ROOT/../shared/traces/alibaba-gpu-v2023-openb}
OUT=${1:-}

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 tarmac_replay >/dev/null
R="$BUILD/bench/tarmac_replay"
NODES="$TRACES/openb_node_list_gpu_node.csv"
DENSE="--since 9964972 --max-runtime 1d --gpus 64,128 --load 0.9,1.1,1.3"
POLICIES="--policy backfill,multifactor,tarmac"

report() {
    echo "# Runtime estimates and reservation slips"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: bench/run-estimate.sh (build: Release, $BUILD)"
    echo "- replays: \`tarmac replay --pods openb_pod_list_TRACE.csv --nodes openb_node_list_gpu_node.csv"
    echo "  $DENSE $POLICIES E\`, E one of: --estimator keys (before: the medians of similar"
    echo "  jobs alone), --estimator model (after: the default, the model in place of the class's"
    echo "  median), --estimator model --fallback-level 3 (the model also in place of the (class, GPUs)"
    echo "  median), --estimates exact (true runtimes: the slips no estimate causes)"
    for trace in default gpuspec33; do
        for est in "--estimator keys" "--estimator model --fallback-level 4" \
            "--estimator model --fallback-level 3" "--estimates exact"; do
            echo
            echo "## openb $trace, $est"
            echo
            "$R" --pods "$TRACES/openb_pod_list_$trace.csv" --nodes "$NODES" $DENSE $POLICIES \
                $est | sed -n '/^reservation slips and estimates/,$p'
        done
    done
}

if [ -n "$OUT" ]; then
    report | tee "$OUT"
else
    report
fi
