#!/usr/bin/env bash
# bench/run-api.sh: job submission through the API (POST /v1/jobs) against
# pgbench's plain single-row INSERT, same database, same run; prints one
# markdown report and writes it to bench/results/api-<date>.md.
#
#   bench/run-api.sh [REPORT.md]
#
# A throwaway PostgreSQL (tests/lib/pg_cluster.sh), `tarmac migrate`,
# TOKENS admin tokens (`tarmac token create`), `tarmac serve` with a sim
# provider whose pools have max_nodes 0 (nothing launches) and a 5 s tick.
# Then pgbench (CONNS clients, DURATION s) inserts single rows into
# bench_jobs, a copy of jobs' shape (columns, defaults, checks, indexes),
# and bench_api_submit keeps CONNS keep-alive connections busy for
# DURATION s.  Afterwards the rows in jobs must equal the 201 answers.
# Besides rates, it prints the CPU time each side spent a row (PostgreSQL,
# serve, the client), which a machine shared with other work does not
# skew the way it skews rates.
#
# Environment: BUILD (default build), CONNS (64), DURATION (20), TOKENS
# (128: the API limits each token to 100 requests/s, so the load is many
# clients), POOL (serve's database pool_size, 4: the default), LEAD (1:
# serve leads and its tick schedules the arriving jobs, a decision and a
# reason for each, on the same cores; 0: this script holds the leader lock
# as run-heartbeat.sh does, so serve only answers the API and the figures
# are the submission path's alone, as pgbench's are the INSERT's).  Not a
# ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
CONNS=${CONNS:-64}
DURATION=${DURATION:-20}
TOKENS=${TOKENS:-128}
POOL=${POOL:-4}
LEAD=${LEAD:-1}
OUT=${1:-$ROOT/bench/results/api-$(date -u +%Y-%m-%d).md}
TARMAC=$BUILD/tarmac
LOADGEN=$BUILD/bench/bench_api_submit
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PGBENCH=$bindir/pgbench
for x in "$TARMAC" "$LOADGEN" "$PGBENCH"; do
    [ -x "$x" ] || { echo "run-api: $x is missing (build with: make -C $BUILD tarmac bench_api_submit)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/tarmac-bench-api.XXXXXX)
chmod 755 "$WORK"
SERVE=
LOCKER=
cleanup() {
    [ -n "$LOCKER" ] && kill "$LOCKER" 2>/dev/null || true
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null || true
    "$ROOT/tests/lib/pg_cluster.sh" stop "$WORK/pg" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$ROOT/tests/lib/pg_cluster.sh" start "$WORK/pg" >/dev/null
# shellcheck disable=SC1091
. "$WORK/pg/pg.env"
psql -X -q -d postgres -c "CREATE DATABASE bench_api" >/dev/null
DB=$TM_PG_BASE/bench_api
psql_q() { psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: $POOL
cluster: bench
listen: "127.0.0.1:$PORT"
tick_interval: 5s
log_level: warn
scheduler:
  policy: fifo
providers:
  - name: sim
    kind: sim
    region: sim-1
    boot_delay: 1s
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
pools:
  - name: od
    provider: sim
    zones: [sim-1a]
    instance_types: [sim.8x]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: 0
    idle_grace: 2s
YAML

export TARMAC_DATABASE_URL=$DB
"$TARMAC" migrate --config "$WORK/c.yaml" >"$WORK/migrate.log" 2>&1 \
    || { cat "$WORK/migrate.log" >&2; exit 1; }
: >"$WORK/tokens"
for i in $(seq 1 "$TOKENS"); do
    "$TARMAC" token create --name "bench-$i" --role admin --config "$WORK/c.yaml" \
        >>"$WORK/tokens" 2>>"$WORK/token.log" || { cat "$WORK/token.log" >&2; exit 1; }
done

if [ "$LEAD" = 0 ]; then
    psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" \
        -c "UPDATE leader_lease SET expires_at = 'infinity'" -c "SELECT pg_sleep(3600)" \
        >/dev/null 2>&1 &
    LOCKER=$!
    for _ in $(seq 1 50); do
        [ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" -ge 1 ] && break
        sleep 0.1
    done
fi
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.1
done
curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null || { echo "run-api: serve not ready" >&2; exit 1; }
# The pools the submissions are checked against come from the config.
for _ in $(seq 1 50); do
    [ "$(psql_q "SELECT count(*) FROM pools")" -gt 0 ] && break
    sleep 0.1
done

# pgbench: one plain single-row INSERT a transaction into a table shaped like
# jobs, simple query protocol, autocommit.
psql_q "CREATE TABLE bench_jobs (LIKE jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES);
        CREATE SEQUENCE bench_jobs_id_seq OWNED BY bench_jobs.id;
        ALTER TABLE bench_jobs ALTER id SET DEFAULT nextval('bench_jobs_id_seq')" >/dev/null
cat >"$WORK/insert.sql" <<'SQL'
INSERT INTO bench_jobs (team, name, command, gpus, gpu_milli, submitted_ms) VALUES ('bench', 'p', '', 1, 1000, 1);
SQL
# CPU seconds each side spends, so that a run on a shared machine (where
# the share of the cores each process gets varies) still says what a row
# costs: PostgreSQL's (every server process, the exited ones through the
# postmaster's children times), serve's, and the client's.
TICK=$(getconf CLK_TCK)
PM=$(head -n 1 "$TM_PG_DIR/data/postmaster.pid")
proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
pg_ticks() {
    local t
    t=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$PM/stat")
    for p in $(pgrep -P "$PM"); do t=$((t + $(proc_ticks "$p"))); done
    echo "$t"
}
TIMEFORMAT='%U %S'
PGBENCH_CMD="pgbench -n -f insert.sql -c $CONNS -j 2 -T $DURATION"
PG0=$(pg_ticks)
{ time "$PGBENCH" -n -f "$WORK/insert.sql" -c "$CONNS" -j 2 -T "$DURATION" "$DB" >"$WORK/pgbench.out" 2>&1 \
    || { cat "$WORK/pgbench.out" >&2; exit 1; } ; } 2>"$WORK/pgbench.time"
PG1=$(pg_ticks)
PG_ROWS=$(psql_q "SELECT count(*) FROM bench_jobs")
PG_TPS=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.out" | head -n 1)
PG_LAT=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$WORK/pgbench.out" | head -n 1)

BEFORE=$(psql_q "SELECT count(*) FROM jobs")
PG2=$(pg_ticks); SV2=$(proc_ticks "$SERVE")
LOAD_CMD="bench_api_submit --url http://127.0.0.1:PORT --tokens FILE --conns $CONNS --duration $DURATION"
set +e
{ time "$LOADGEN" --url "http://127.0.0.1:$PORT" --tokens "$WORK/tokens" --conns "$CONNS" \
    --duration "$DURATION" >"$WORK/load.out" 2>&1 ; } 2>"$WORK/load.time"
LOAD_RC=$?
set -e
PG3=$(pg_ticks); SV3=$(proc_ticks "$SERVE")
ROWS=$(( $(psql_q "SELECT count(*) FROM jobs") - BEFORE ))
res() { sed -n "s/^RESULT .*\\b$1=\\([^ ]*\\).*/\\1/p" "$WORK/load.out"; }
API_RPS=$(res rps)
[ -n "$API_RPS" ] || { cat "$WORK/load.out" "$WORK/serve.log" >&2; exit 1; }
CREATED=$(res total_created)
RATIO=$(awk "BEGIN { printf \"%.2f\", $API_RPS / $PG_TPS }")
# CPU microseconds a row (warm-ups included on both sides).
us_row() { awk "BEGIN { printf \"%.0f\", ($1) * 1000000 / ($2 > 0 ? $2 : 1) }"; }
PGB_DB=$(us_row "($PG1 - $PG0) / $TICK" "$PG_ROWS")
PGB_CLIENT=$(us_row "$(awk '{ print $1 + $2 }' "$WORK/pgbench.time")" "$PG_ROWS")
API_DB=$(us_row "($PG3 - $PG2) / $TICK" "$ROWS")
API_SERVE=$(us_row "($SV3 - $SV2) / $TICK" "$ROWS")
API_CLIENT=$(us_row "$(awk '{ print $1 + $2 }' "$WORK/load.time")" "$ROWS")
P99=$(res p99_ms)
MET=no
awk "BEGIN { exit !($API_RPS >= $PG_TPS && $P99 < 20) }" && MET=yes
[ "$ROWS" = "$CREATED" ] && CHECK="yes ($ROWS rows = $CREATED answers 201)" \
    || CHECK="NO: $ROWS rows in jobs, $CREATED answers 201"

{
    echo "# API submission benchmark"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr)"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- controller bench 2>/dev/null || echo ' (with local changes)')"
    echo "- command: BUILD=$BUILD CONNS=$CONNS DURATION=$DURATION TOKENS=$TOKENS POOL=$POOL LEAD=$LEAD bench/run-api.sh"
    [ "$LEAD" = 0 ] && echo "- serve does not lead (this script holds the leader lock): no tick schedules the jobs"
    echo "- PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') from tests/lib/pg_cluster.sh (fsync and synchronous_commit off),"
    echo "  serve's pool_size $POOL, everything on loopback and the same cores"
    echo "- pgbench: \`$PGBENCH_CMD\` (simple protocol, one INSERT a transaction into bench_jobs, jobs' shape)"
    echo "- API: \`$LOAD_CMD\` ($TOKENS admin tokens in rotation, 1 s warm-up not counted)"
    echo
    echo "| pgbench INSERT tps | API jobs/s | ratio API/pgbench | API p99 ms | target (>= 1.0x pgbench, p99 < 20 ms) |"
    echo "|---:|---:|---:|---:|:---|"
    echo "| ${PG_TPS%.*} | $API_RPS | $RATIO | $P99 | $MET |"
    echo
    echo "pgbench latency average: $PG_LAT ms.  Rows in jobs equal the 201 answers: $CHECK."
    echo
    echo "CPU per row (microseconds, user + system):"
    echo
    echo "| side | PostgreSQL | serve | client | server side (PostgreSQL + serve) |"
    echo "|---|---:|---:|---:|---:|"
    echo "| pgbench INSERT ($PG_ROWS rows) | $PGB_DB | - | $PGB_CLIENT | $PGB_DB |"
    echo "| API ($ROWS jobs) | $API_DB | $API_SERVE | $API_CLIENT | $((API_DB + API_SERVE)) |"
    echo
    echo '```'
    grep -v '^RESULT' "$WORK/load.out"
    echo '```'
} | tee "$OUT"
[ "$LOAD_RC" = 0 ] || echo "run-api: the load generator saw errors (exit $LOAD_RC)" >&2
[ "$ROWS" = "$CREATED" ] || exit 1
