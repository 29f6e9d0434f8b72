#!/bin/sh
# scripts/check-behaviour.sh: md5 sums of the replays whose output must not
# change under a refactoring (the scheduler's time replay on openb default
# and gpuspec33, and three elastic replays), for one Release build folder.
#
#   scripts/check-behaviour.sh BUILD_DIR [SUMS_FILE]
#
# BUILD_DIR must hold tarmac and bench/tarmac_replay (make tarmac tarmac_replay).
# With SUMS_FILE, the sums are compared with it and the script fails on any
# difference.  The timing fields (events/s, wall_s) are masked first.  TRACES defaults to ../shared/traces beside the source tree.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$1" && pwd)
WANT=${2:-}
TRACES=${TRACES:-$ROOT/../shared/traces}
OB="$TRACES/alibaba-gpu-v2023-openb"
OUT=${OUT:-$(mktemp -d)}
PRICES="$ROOT/bench/prices"
COMMON="--since 9964972 --max-runtime 1d --boot-s 180 --seed 1"

for trace in default gpuspec33; do
    "$BUILD/bench/tarmac_replay" --pods "$OB/openb_pod_list_$trace.csv" \
        --nodes "$OB/openb_node_list_gpu_node.csv" --since 9964972 --max-runtime 1d \
        --gpus 64,128 --load 0.9,1.3 >"$OUT/sched-$trace.txt"
done
el() { name=$1; shift
    "$BUILD/tarmac" replay --elastic --policy static,reactive,tarmac --json "$@" >"$OUT/elastic-$name.json"
}
el A --pods "$OB/openb_pod_list_default.csv" $COMMON --prices "$PRICES/uniform-8gpu.yaml" --spot on --hazard 0.05
el C --pods "$OB/openb_pod_list_default.csv" $COMMON --prices "$PRICES/uniform-sizes.yaml" --spot off
el H --pods "$OB/openb_pod_list_default.csv" $COMMON --prices "$PRICES/uniform-8gpu.yaml" --spot on \
    --hazard 0.05 --checkpointable be --hazards "$PRICES/spot-hazards-8gpu-v100.yaml"

# The outputs name their input files: the checkout's place is not the
# schedule, so the paths are written relative to it before hashing.
for f in "$OUT"/sched-*.txt "$OUT"/elastic-*.json; do
    sed -e "s|$TRACES|TRACES|g" -e "s|$ROOT|ROOT|g" "$f" >"$f.tmp" && mv "$f.tmp" "$f"
done
# The only fields that measure the machine rather than the schedule: the
# scheduler table's last column (events/s) and the elastic runs' wall_s.
for f in "$OUT"/sched-*.txt; do
    sed -E '/^\| (fifo|backfill|tarmac|multifactor|oracle) \|/s/\| [0-9]+ \|$/| - |/' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
done
for f in "$OUT"/elastic-*.json; do
    sed -E 's/("wall_s":[[:space:]]*)[0-9.e+-]+/\1-/' "$f" >"$f.tmp" && mv "$f.tmp" "$f"
done
(cd "$OUT" && md5sum sched-default.txt sched-gpuspec33.txt elastic-A.json elastic-C.json elastic-H.json) >"$OUT/md5"
cat "$OUT/md5"
if [ -n "$WANT" ]; then
    diff "$WANT" "$OUT/md5" && echo "check-behaviour: identical to $WANT"
fi
