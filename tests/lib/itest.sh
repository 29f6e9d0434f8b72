#!/usr/bin/env bash
# Shared helpers for the shell integration tests.  Source it; it sets
#   TARMAC   the binary under test
#   WORK     a scratch directory removed on exit
# and defines fail, new_db, write_config, psql_q, wait_for.
set -euo pipefail

TARMAC=${TM_BIN:?run through ctest}
WORK=$(mktemp -d /tmp/tarmac-itest.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    if [ -n "${TM_KEEP_WORK:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# shellcheck disable=SC1091
. "${TM_TEST_STATE:?}/pg.env"

fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 40 "$f" >&2; }; done
    exit 1
}

# new_db NAME: a fresh database; prints its URL.
new_db() { "$TM_SOURCE_DIR/tests/lib/pg_newdb.sh" "$1"; }

psql_q() { psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

# wait_for SECONDS 'CONDITION': poll until the shell condition (a string,
# evaluated afresh each time) succeeds.
wait_for() {
    local limit=$1; shift
    local end=$(( $(date +%s) + limit ))
    until eval "$1"; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.2
    done
}

# write_config FILE [max_nodes] [idle_grace] [boot_delay] [tick]: a sim
# cloud in real time with short delays, two pools (on-demand and spot).
write_config() {
    local file=$1 max=${2:-4} grace=${3:-2s} boot=${4:-1s} tick=${5:-300ms}
    cat >"$file" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: itest
listen: "127.0.0.1:0"
tick_interval: $tick
log_level: info
scheduler:
  policy: fifo
providers:
  - name: sim
    kind: sim
    region: sim-1
    boot_delay: $boot
    spot_hazard: 0
    shutdown_delay: 1s
    seed: 7
    instance_types:
      - name: sim.8x
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1000000
        on_demand_price: "32.77"
        spot_price: "9.83"
      - name: sim.1x
        gpus: 1
        gpu_model: A100
        cpu_milli: 12000
        memory_mib: 120000
        on_demand_price: "4.10"
        spot_price: "1.23"
pools:
  - name: od
    provider: sim
    zones: [sim-1a, sim-1b]
    instance_types: [sim.8x]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
  - name: spot
    provider: sim
    zones: [sim-1a]
    instance_types: [sim.8x]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: spot
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
YAML
}
