#!/usr/bin/env bash
# Set tarmac up and show it working, in one to two minutes.
#
#   scripts/demo.sh
#
# Installs what is missing, builds, creates a local PostgreSQL cluster in
# .tarmac/pg (unless TARMAC_DATABASE_URL is set), migrates, queues a
# generated workload and runs `tarmac serve` on the simulated cloud with its
# clock 60x faster than real time (config/demo.yaml): nodes are requested
# and booted, jobs placed and finished, idle nodes released, dollars counted.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash scripts/setup.sh
tarmac=$root/build/tarmac
config=$root/config/demo.yaml

if [ -z "${TARMAC_DATABASE_URL:-}" ]; then
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    state=$root/.tarmac
    data=$state/pg
    port=${TARMAC_DEMO_PORT:-55432}
    as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
    mkdir -p "$state"
    if [ ! -f "$data/PG_VERSION" ]; then
        echo "demo: creating a PostgreSQL cluster in $data"
        mkdir -p "$data"
        [ "$(id -u)" = 0 ] && chown postgres: "$data" && chmod 755 "$state"
        as_pg "$bindir/initdb" -D "$data" -A trust -U postgres --no-instructions >/dev/null
        printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n" \
            "$port" "$data" >>"$data/postgresql.conf"
    fi
    as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1 ||
        as_pg "$bindir/pg_ctl" -D "$data" -l "$data/server.log" -w start >/dev/null
    trap 'as_pg "$bindir/pg_ctl" -D "$data" -w stop >/dev/null 2>&1 || true' EXIT
    # A fresh database each run, so the summary is this run's.
    as_pg "$bindir/psql" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres \
        -c "DROP DATABASE IF EXISTS tarmac_demo WITH (FORCE)" -c "CREATE DATABASE tarmac_demo" >/dev/null
    export TARMAC_DATABASE_URL="postgresql://postgres@127.0.0.1:$port/tarmac_demo"
fi

"$tarmac" migrate --config "$config"

echo "demo: queueing a generated workload"
submit() { "$tarmac" submit --config "$config" "$@" >/dev/null; }
# Training on whole 8-GPU nodes, multi-GPU fine-tuning, evaluation and
# preprocessing on single GPUs, and preemptible inference sharing GPUs on
# spot capacity.  Runtimes are simulated (--runtime), in controller time.
submit --team vision --name resnet-train --gpus 8 --class train --estimate 50m --runtime 45m --count 2
submit --team nlp --name llm-finetune --gpus 4 --class train --estimate 40m --runtime 35m --count 3
submit --team nlp --name eval-suite --gpus 1 --class eval --estimate 12m --runtime 10m --count 8
submit --team vision --name preprocess --gpus 2 --class preprocess --estimate 20m --runtime 15m --count 4
submit --team search --name embed-serve --gpu-milli 250 --class inference --preemptible \
    --estimate 25m --runtime 20m --count 12
submit --team search --name batch-score --gpus 1 --class batch --preemptible --estimate 30m \
    --runtime 30m --count 6
"$tarmac" pools --config "$config"
echo
echo "demo: running the controller (60x accelerated clock; stops when all work is done and every node is released)"
start=$(date +%s)
"$tarmac" serve --config "$config" --exit-when-idle --max-wall 170s 2>&1 |
    grep -E 'became leader|op=(request_node|node_ready|adopt|place|reserve|preempt|terminate|node_gone|launch_failed|orphan)|instance launched|job finished|requeue|stopping' |
    sed -E 's/^[0-9T:.-]+Z level=[a-z]+ //' || true
echo
echo "demo: finished in $(( $(date +%s) - start )) s of wall time"
echo "demo: summary"
"$tarmac" summary --config "$config"
echo
echo "demo: why was the first node launched?"
"$tarmac" decisions --config "$config" --subject node:1 --limit 5
