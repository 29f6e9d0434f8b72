#!/usr/bin/env bash
# bench/run-heartbeat.sh: node agents' heartbeats through the API
# (POST /v1/nodes/{id}/heartbeat, 8 GPU samples each, each node with its own
# agent token) against pgbench doing the same writes by hand (one UPDATE of
# the node's heartbeat time and one 8-row INSERT into a copy of
# gpu_samples a transaction), same database, same run.  Prints a markdown
# table and writes it to bench/results/heartbeat.md.
#
#   bench/run-heartbeat.sh [REPORT.md]
#
# A throwaway PostgreSQL (tests/lib/pg_cluster.sh), `tarmac migrate`, NODES
# ready nodes with an agent token each (rows written as enrollment writes
# them), `tarmac serve` with a sim provider that launches nothing.  Aim
#: 10,000 nodes every 10 s is 1,000 heartbeats/s; at least that
# with p99 < 50 ms.
#
# Environment: BUILD (default build), CONNS (64), DURATION (20), NODES
# (2000), POOL (serve's database pool_size, 4), WARMUP (seconds sent but
# not counted, 1; long enough for every node's first heartbeat, which
# authenticates its token, measures the steady state of a fleet whose
# agents heartbeat every 10 s).  Not a ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
CONNS=${CONNS:-64}
DURATION=${DURATION:-20}
NODES=${NODES:-2000}
POOL=${POOL:-4}
WARMUP=${WARMUP:-1}
OUT=${1:-$ROOT/bench/results/heartbeat.md}
TARMAC=$BUILD/tarmac
LOADGEN=$BUILD/bench/bench_heartbeat
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PGBENCH=$bindir/pgbench
for x in "$TARMAC" "$LOADGEN" "$PGBENCH"; do
    [ -x "$x" ] || { echo "run-heartbeat: $x is missing (build with: cmake --build $BUILD --target tarmac bench_heartbeat)" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/tarmac-bench-hb.XXXXXX)
chmod 755 "$WORK"
SERVE=
LOCKER=
cleanup() {
    [ -n "$LOCKER" ] && kill "$LOCKER" 2>/dev/null || true
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null || true
    "$ROOT/tests/lib/pg_cluster.sh" stop "$WORK/pg" >/dev/null 2>&1 || true
    if [ -n "${KEEP:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

"$ROOT/tests/lib/pg_cluster.sh" start "$WORK/pg" >/dev/null
# shellcheck disable=SC1091
. "$WORK/pg/pg.env"
psql -X -q -d postgres -c "CREATE DATABASE bench_hb" >/dev/null
DB=$TM_PG_BASE/bench_hb
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
api:
  rate_per_token: 100000
  burst: 1000000
providers:
  - name: sim
    kind: sim
    region: sim-1
    instance_types:
      - {name: sim.8x, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,
         on_demand_price: "32.77", spot_price: "9.83"}
pools:
  - {name: od, provider: sim, zones: [sim-1a], instance_types: [sim.8x], gpu_model: A100,
     gpus_per_node: 8, capacity_type: on_demand, min_nodes: 0, max_nodes: 0, idle_grace: 2s}
YAML
export TARMAC_DATABASE_URL=$DB
"$TARMAC" migrate --config "$WORK/c.yaml" >"$WORK/migrate.log" 2>&1 \
    || { cat "$WORK/migrate.log" >&2; exit 1; }
# The nodes below exist in no cloud: this session holds the leader lock
# (TM_LEADER_LOCK_KEY) so that serve only answers the API and never
# reconciles them away.
psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" \
    -c "UPDATE leader_lease SET expires_at = 'infinity'" -c "SELECT pg_sleep(3600)" \
    >/dev/null 2>&1 &
LOCKER=$!
for _ in $(seq 1 50); do
    [ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" -ge 1 ] && break
    sleep 0.1
done
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.1
done
for _ in $(seq 1 50); do
    [ "$(psql_q "SELECT count(*) FROM pools")" -gt 0 ] && break
    sleep 0.1
done
# NODES ready nodes, each with an agent token (what POST /v1/agent/enroll
# stores: the SHA-256 of the token, role agent, the node's id).
psql_q "INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
          cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms,
          billed_from_ms, ready_ms)
        SELECT 'od', 'tok-' || g, 'i-' || g, 'sim-1a', 'sim.8x', 8, 'A100', 96000, 1000000,
          'on_demand', 'ready', 32770000, 1, 1, 2 FROM generate_series(1, $NODES) g" >/dev/null
psql_q "SELECT id FROM nodes ORDER BY id" >"$WORK/ids"
python3 - "$WORK" <<'PY'
import hashlib, os, secrets, sys
work = sys.argv[1]
with open(os.path.join(work, "ids")) as f, open(os.path.join(work, "tokens"), "w") as t, \
        open(os.path.join(work, "tokens.sql"), "w") as q:
    q.write("COPY api_tokens (name, role, hash, created_ms, node_id) FROM stdin;\n")
    for line in f:
        node = line.strip()
        tok = "tmk_" + secrets.token_hex(32)
        t.write(f"{node} {tok}\n")
        q.write(f"agent-{node}\tagent\t{hashlib.sha256(tok.encode()).hexdigest()}\t1\t{node}\n")
    q.write("\\.\n")
PY
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$WORK/tokens.sql" >/dev/null

# pgbench: the heartbeat's writes by hand, into a copy of gpu_samples.
psql_q "CREATE TABLE bench_samples (LIKE gpu_samples INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)" >/dev/null
MAXID=$(psql_q "SELECT max(id) FROM nodes")
MINID=$(psql_q "SELECT min(id) FROM nodes")
cat >"$WORK/hb.sql" <<SQL
\\set node random($MINID, $MAXID)
\\set at random(1, 1000000000000)
BEGIN;
UPDATE nodes SET last_heartbeat_ms = :at WHERE id = :node;
INSERT INTO bench_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib, uuid,
  memory_total_mib, temperature_c, power_w)
  SELECT :node, g, :at, 37.5, 1024, 'GPU-' || g, 81920, 41, 180.5 FROM generate_series(0, 7) g
  ON CONFLICT DO NOTHING;
COMMIT;
SQL
PGBENCH_CMD="pgbench -n -f hb.sql -c $CONNS -j 2 -T $DURATION"
"$PGBENCH" -n -f "$WORK/hb.sql" -c "$CONNS" -j 2 -T "$DURATION" "$DB" >"$WORK/pgbench.out" 2>&1 \
    || { cat "$WORK/pgbench.out" >&2; exit 1; }
PG_TPS=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.out" | head -n 1)
PG_LAT=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$WORK/pgbench.out" | head -n 1)

BEFORE=$(psql_q "SELECT count(*) FROM gpu_samples")
LOAD_CMD="bench_heartbeat --url http://127.0.0.1:PORT --tokens FILE --conns $CONNS --duration $DURATION --warmup $WARMUP"
set +e
"$LOADGEN" --url "http://127.0.0.1:$PORT" --tokens "$WORK/tokens" --conns "$CONNS" \
    --duration "$DURATION" --warmup "$WARMUP" >"$WORK/load.out" 2>&1
LOAD_RC=$?
set -e
SAMPLES=$(( $(psql_q "SELECT count(*) FROM gpu_samples") - BEFORE ))
res() { sed -n "s/^RESULT .*\\b$1=\\([^ ]*\\).*/\\1/p" "$WORK/load.out"; }
API_RPS=$(res rps)
[ -n "$API_RPS" ] || { cat "$WORK/load.out" "$WORK/serve.log" >&2; exit 1; }
OKS=$(res total_created)
RATIO=$(awk "BEGIN { printf \"%.2f\", $API_RPS / $PG_TPS }")
P99=$(res p99_ms)
P50=$(res p50_ms)
MET=no
awk "BEGIN { exit !($API_RPS >= 1000 && $P99 < 50) }" && MET=yes
[ "$SAMPLES" = "$(( OKS * 8 ))" ] && CHECK="yes ($SAMPLES samples = 8 x $OKS answers 200)" \
    || CHECK="NO: $SAMPLES samples stored for $OKS answers 200"

{
    echo "# Heartbeat benchmark (node agents, 8 GPU samples each)"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- controller bench migrations 2>/dev/null || echo ' (with local changes)')"
    echo "- command: BUILD=$BUILD CONNS=$CONNS DURATION=$DURATION NODES=$NODES POOL=$POOL WARMUP=$WARMUP bench/run-heartbeat.sh"
    echo "- PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') from tests/lib/pg_cluster.sh (fsync and synchronous_commit off),"
    echo "  serve's pool_size $POOL, everything on loopback and the same cores"
    echo "- pgbench: \`$PGBENCH_CMD\` (the heartbeat's writes by hand: UPDATE nodes + 8-row INSERT a transaction)"
    echo "- API: \`$LOAD_CMD\` ($NODES nodes, each its own agent token, in rotation; $WARMUP s warm-up not counted)"
    echo
    echo "| pgbench tps | API heartbeats/s | samples/s | ratio API/pgbench | API p50 ms | API p99 ms | target (>= 1000/s, p99 < 50 ms) |"
    echo "|---:|---:|---:|---:|---:|---:|:---|"
    echo "| ${PG_TPS%.*} | $API_RPS | $(( API_RPS * 8 )) | $RATIO | $P50 | $P99 | $MET |"
    echo
    echo "pgbench latency average: $PG_LAT ms.  Samples stored equal 8 per answer 200: $CHECK."
    echo
    echo '```'
    grep -v '^RESULT' "$WORK/load.out"
    echo '```'
} | tee "$OUT"
[ "$LOAD_RC" = 0 ] || echo "run-heartbeat: the load generator saw errors (exit $LOAD_RC)" >&2
