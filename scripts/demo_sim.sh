#!/usr/bin/env bash
# The simulated-cloud demo, for the bigger fleet: set tarmac up and show
# it working, in one to two minutes.
#
#   scripts/demo.sh --sim      (or scripts/demo_sim.sh)
#
# Installs what is missing, builds, creates a local PostgreSQL cluster
# (scripts/demo_db.sh; unless TARMAC_DATABASE_URL is set), migrates, and
# runs `tarmac serve` on the simulated cloud with its clock 60x faster than
# real time (config/demo.yaml), queues a generated workload through its HTTP
# API with the CLI: nodes are requested and booted, jobs placed and
# finished, idle nodes released, dollars counted; then spend, budgets and
# why a node was launched, from the API, the totals from the database, and
# the same jobs priced under a static fleet and a reactive autoscaler.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/setup.sh
tarmac=$root/build/tarmac
config=$root/config/demo.yaml

if [ -z "${TARMAC_DATABASE_URL:-}" ]; then
    # The demo's own cluster lives outside the checkout (scripts/demo_db.sh
    # says where and why); each run gets a fresh database in it.
    pgdir=$(bash scripts/demo_db.sh where)
    echo "demo: PostgreSQL cluster in $pgdir (port ${TARMAC_DEMO_PORT:-55432}; it is kept between runs," \
         "stopped at the end; remove it with: bash scripts/demo_db.sh remove)"
    [ -d "$root/.tarmac/pg" ] &&
        echo "demo: an earlier demo's cluster in $root/.tarmac/pg is no longer used; rm -rf $root/.tarmac removes it"
    TARMAC_DATABASE_URL=$(bash scripts/demo_db.sh start tarmac_demo)
    export TARMAC_DATABASE_URL
    stop_pg='bash "$root/scripts/demo_db.sh" stop'
    trap "$stop_pg" EXIT
fi

"$tarmac" migrate --config "$config"

# The controller serves the HTTP API on a free port; everything below talks
# to it as a user would, with a token in TARMAC_TOKEN.
work=$(mktemp -d /tmp/tarmac-demo.XXXXXX)
trap 'kill "${serve_pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; eval "${stop_pg:-true}"' EXIT
TARMAC_TOKEN=$("$tarmac" token create --config "$config" --name "demo-$(date +%s)-$$" --role admin 2>/dev/null)
export TARMAC_TOKEN
TARMAC_LISTEN=127.0.0.1:0 "$tarmac" serve --config "$config" --max-wall 170s >"$work/serve.log" 2>&1 &
serve_pid=$!
for _ in $(seq 100); do grep -q 'api listening' "$work/serve.log" && break; sleep 0.1; done
port=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$work/serve.log" | head -n 1)
[ -n "$port" ] || { cat "$work/serve.log"; echo "demo: the API did not start" >&2; exit 1; }
export TARMAC_URL=http://127.0.0.1:$port
echo "demo: the controller serves the API at $TARMAC_URL (60x accelerated clock)"
# Its log, the interesting lines only, until it stops.
tail -n +1 -F --pid="$serve_pid" "$work/serve.log" 2>/dev/null |
    grep --line-buffered -E 'became leader|op=(request_node|node_ready|adopt|place|reserve|preempt|terminate|node_gone|launch_failed|orphan)|instance launched|job finished|requeue|stopping' |
    sed -u -E 's/^[0-9T:.-]+Z level=[a-z]+ //' &

echo "demo: queueing a generated workload through the API (tarmac submit)"
submit() { "$tarmac" submit "$@" >/dev/null; }
# Training on whole 8-GPU nodes, multi-GPU fine-tuning, evaluation and
# preprocessing on single GPUs, and preemptible inference sharing GPUs on
# spot capacity.  A simulated node runs each job for its estimate, in
# controller time.
start=$(date +%s)
submit --team vision --name resnet-train --gpus 8 --class train --estimate 45m --count 2
submit --team nlp --name llm-finetune --gpus 4 --class train --estimate 35m --count 3
submit --team nlp --name eval-suite --gpus 1 --class eval --estimate 10m --count 8
submit --team vision --name preprocess --gpus 2 --class preprocess --estimate 15m --count 4
submit --team search --name embed-serve --gpu-milli 250 --class inference --preemptible \
    --estimate 20m --count 12
submit --team search --name batch-score --gpus 1 --class batch --preemptible --estimate 30m --count 6
"$tarmac" budget set nlp --cap-cents 50000 --soft --warn-percent 80 >/dev/null
"$tarmac" pools
echo
"$tarmac" jobs --limit 5
echo
# Done when nothing is queued or running and every node is released.
busy() {
    "$tarmac" jobs --state queued --limit 1 --output json | grep -q '"id"' ||
        "$tarmac" jobs --state running --limit 1 --output json | grep -q '"id"' ||
        "$tarmac" nodes --limit 1 --output json | grep -q '"id"'
}
while kill -0 "$serve_pid" 2>/dev/null && busy; do sleep 2; done
echo
echo "demo: all work done and every node released after $(( $(date +%s) - start )) s of wall time"
echo "demo: this month's spend (tarmac spend)"
"$tarmac" spend
echo
echo "demo: budgets (tarmac budget show)"
"$tarmac" budget show
echo
echo "demo: why was the first node launched, and released? (tarmac why node 1)"
"$tarmac" why node 1 --limit 5
kill -TERM "$serve_pid" 2>/dev/null || true
wait "$serve_pid" || true
wait
echo
echo "demo: summary (tarmac db summary, straight from the database)"
"$tarmac" db summary --config "$config"
echo
python3 scripts/demo_compare.py --config "$config" --tarmac "$tarmac"
