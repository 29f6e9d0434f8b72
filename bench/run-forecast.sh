#!/bin/sh
# bench/run-forecast.sh: evaluate the demand forecaster (tarmac, naive,
# seasonal-naive) on every Helios Earth VC per-minute series and on the
# demand derived from openb default; prints one markdown report and writes
# it to bench/results/forecast-<date>.md (or to REPORT.md when given).
#
#   bench/run-forecast.sh [REPORT.md]
#
# Environment: BUILD (build folder, default build-forecast), TRACES (the
# shared traces folder, default ../shared/traces beside the source tree),
# HORIZON_S (default 240 = 180 s boot + 60 s tick), QUANTILE (default 0.9).
# Needs jq.  Takes a few seconds.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-forecast}
TRACES=${TRACES:-$ROOT/../shared/traces}
HORIZON_S=${HORIZON_S:-240}
QUANTILE=${QUANTILE:-0.9}
OUT=${1:-$ROOT/bench/results/forecast-$(date -u +%Y-%m-%d).md}
HELIOS="$TRACES/helios-sensetime/earth_vc_minute_sequences_2020-05"
PODS="$TRACES/alibaba-gpu-v2023-openb/openb_pod_list_default.csv"

command -v jq >/dev/null || { echo "run-forecast.sh: jq is required" >&2; exit 2; }
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 tarmac >/dev/null
FC="$BUILD/tarmac"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# One JSON document per series: NAME FILE ARGS...
run() {
    name=$1
    shift
    "$FC" forecast "$@" --horizon-s "$HORIZON_S" --quantile "$QUANTILE" --json >"$TMP/$name.json"
    echo "$name" >>"$TMP/order"
}

: >"$TMP/order"
for f in "$HELIOS"/*_cluster_sequence_vc.csv; do
    vc=$(basename "$f" _cluster_sequence_vc.csv)
    run "$vc-demand" --series "$f" --time-column time --value-columns running_gpu_num,pending_gpu_num
done
run openb-default-demand --pods "$PODS"
: >"$TMP/order2"
for f in "$HELIOS"/*_cluster_sequence_vc.csv; do
    vc=$(basename "$f" _cluster_sequence_vc.csv)
    for col in running_gpu_num pending_gpu_num; do
        name="$vc-${col%_gpu_num}"
        "$FC" forecast --series "$f" --time-column time --value-columns "$col" \
            --horizon-s "$HORIZON_S" --quantile "$QUANTILE" --json >"$TMP/$name.json"
        echo "$name" >>"$TMP/order2"
    done
done

table() {
    echo "| series | steps scored | pinball tarmac | pinball naive | pinball seasonal-naive | MAPE % tarmac | MAPE % naive | MAPE % seasonal-naive | coverage tarmac | tarmac < seasonal-naive | tarmac < naive |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    while read -r name; do
        jq -r --arg n "$name" '
            def r(m): .results[] | select(.model == m);
            [$n, r("tarmac").scored, r("tarmac").pinball, r("naive").pinball,
             r("seasonal-naive").pinball, r("tarmac").mape, r("naive").mape,
             r("seasonal-naive").mape, r("tarmac").coverage,
             (if .tarmac_beats_seasonal_naive then "yes" else "**no**" end),
             (if .tarmac_beats_naive then "yes" else "no" end)] | @tsv' "$TMP/$name.json" |
            awk -F'\t' '{ printf "| %s | %d | %.4f | %.4f | %.4f | %.2f | %.2f | %.2f | %.3f | %s | %s |\n",
                           $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }'
    done <"$1"
}

report() {
    echo "# Demand forecast benchmark"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr)"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: bench/run-forecast.sh (build: Release, $BUILD), which runs for each series"
    echo "  \`tarmac forecast --series FILE --time-column time --value-columns running_gpu_num,pending_gpu_num --horizon-s $HORIZON_S --quantile $QUANTILE --json\`"
    echo "  and \`tarmac forecast --pods openb_pod_list_default.csv --horizon-s $HORIZON_S --quantile $QUANTILE --json\`"
    echo "- traces: $HELIOS (every VC file), $PODS"
    echo "- binary: $FC"
    echo
    echo "Rolling origin: each model is fed minute by minute and forecasts $HORIZON_S s ahead"
    echo "(rounded up to whole one-minute steps) at every step; steps in the first day are"
    echo "warm-up and not scored. Pinball loss is of the q = $QUANTILE upper forecast (each model's"
    echo "point forecast plus a quantile of its own past errors; tarmac's per volatility band),"
    echo "MAPE is of the mean and skips zero actuals, coverage is the share of steps at or"
    echo "under the upper forecast. Seasonal-naive is the value one day earlier."
    echo "openb demand: GPUs wanted by pods from creation to deletion (running or pending),"
    echo "num_gpu, or gpu_milli/1000 for one-GPU pods, from the first deletion to the trace end."
    echo
    echo "## Demand (running + pending GPUs)"
    echo
    table "$TMP/order"
    echo
    echo "## Components (running GPUs, pending GPUs alone)"
    echo
    table "$TMP/order2"
    echo
    if jq -e -s 'all(.[]; .tarmac_beats_seasonal_naive)' "$TMP"/*.json >/dev/null; then
        echo "Target (tarmac's pinball below seasonal-naive's on every series): **met**."
    else
        echo "Target (tarmac's pinball below seasonal-naive's on every series): **not met**."
    fi
}

report >"$TMP/report.md"
cat "$TMP/report.md"
mkdir -p "$(dirname "$OUT")"
cp "$TMP/report.md" "$OUT"
echo
echo "written to $OUT"
