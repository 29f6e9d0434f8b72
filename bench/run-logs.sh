#!/usr/bin/env bash
# bench/run-logs.sh: job output stored by the controller (docs/logs.md),
# and what that load does to the reconcile tick.  Prints a markdown table
# and writes it to bench/results/logs.md.
#
#   bench/run-logs.sh [REPORT.md]
#
# A throwaway PostgreSQL (tests/lib/pg_cluster.sh), `tarmac serve` leading
# a sim fleet that runs JOBS one-GPU jobs (sim_runtime 1 h, so they run
# throughout), ticking every TICK.  First QUIET seconds with no output:
# the ticks' durations (serve's debug line "tick done took_ms=") give the
# quiet p99.  Then DURATION seconds in which every job writes without pause
# (bench/log_load.py: a thread per job posting batches of BATCH chunks of
# CHUNK bytes to POST /v1/nodes/{id}/logs, each where the last ended, as
# the agent ships): the bytes stored per second (sum of the streams'
# next_offset over the load's wall time) and the ticks' p99 under that
# load.  Aim: at least 50 MB/s with the tick's p99 within 10% of quiet.
#
# STORE picks logs.store: postgres, or s3, which starts moto's S3 server on
# loopback (tests/lib/moto_fixture.sh: every request's signature checked),
# makes its bucket and hands serve the key through the environment
# (logs.s3.credentials.source: env); S3_YAML replaces that logs.s3 block
# to aim at another bucket.  Environment: BUILD (build), JOBS (100), TICK
# (500ms), QUIET (20), DURATION (20), CHUNK (65536), BATCH (2), POOL (8).
# Not a ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
JOBS=${JOBS:-100}
TICK=${TICK:-500ms}
QUIET=${QUIET:-20}
DURATION=${DURATION:-20}
CHUNK=${CHUNK:-65536}
BATCH=${BATCH:-2}
POOL=${POOL:-8}
STORE=${STORE:-postgres}
OUT=${1:-$ROOT/bench/results/logs.md}
TARMAC=$BUILD/tarmac
[ -x "$TARMAC" ] || { echo "run-logs: $TARMAC is missing (cmake --build $BUILD --target tarmac)" >&2; exit 1; }
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)

WORK=$(mktemp -d /tmp/tarmac-bench-logs.XXXXXX)
chmod 755 "$WORK"
SERVE=
cleanup() {
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null || true
    "$ROOT/tests/lib/moto_fixture.sh" stop "$WORK/moto" >/dev/null 2>&1 || true
    "$ROOT/tests/lib/pg_cluster.sh" stop "$WORK/pg" >/dev/null 2>&1 || true
    if [ -n "${KEEP:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

"$ROOT/tests/lib/pg_cluster.sh" start "$WORK/pg" >/dev/null
# shellcheck disable=SC1091
. "$WORK/pg/pg.env"
psql -X -q -d postgres -c "CREATE DATABASE bench_logs" >/dev/null
DB=$TM_PG_BASE/bench_logs
psql_q() { psql -X -q -t -A -v ON_ERROR_STOP=1 -d "$DB" -c "$1"; }

S3_NOTE=
if [ "$STORE" = s3 ] && [ -z "${S3_YAML:-}" ]; then
    "$ROOT/tests/lib/moto_fixture.sh" start "$WORK/moto" 's3:*' >"$WORK/moto.env" 2>"$WORK/moto.log" \
        || { cat "$WORK/moto.log" >&2; exit 1; }
    S3URL=http://127.0.0.1:$(sed -n 's/^MOTO_PORT=//p' "$WORK/moto.env")
    AWS_ACCESS_KEY_ID=$(sed -n 's/^MOTO_ACCESS_KEY_ID=//p' "$WORK/moto.env")
    AWS_SECRET_ACCESS_KEY=$(sed -n 's/^MOTO_SECRET_ACCESS_KEY=//p' "$WORK/moto.env")
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
    unset AWS_SESSION_TOKEN AWS_PROFILE
    python3 -c 'import sys, boto3; boto3.client("s3", endpoint_url=sys.argv[1],
        region_name="us-east-1").create_bucket(Bucket="bench-logs")' "$S3URL"
    S3_YAML="  s3:
    bucket: bench-logs
    endpoint: $S3URL
    region: us-east-1
    prefix: bench-
    credentials: {source: env}"
    S3_NOTE="moto $(python3 -c 'import moto; print(moto.__version__)') S3 server on loopback (one Python process, signature checking on) on the same cores"
fi

NODES=$(( (JOBS + 7) / 8 ))
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: $POOL
cluster: bench
listen: "127.0.0.1:$PORT"
tick_interval: $TICK
log_level: debug
api:
  rate_per_token: 100000
  burst: 1000000
logs:
  store: $STORE
  max_chunk: $CHUNK
${S3_YAML:-}
providers:
  - name: sim
    kind: sim
    region: sim-1
    boot_delay: 0s
    instance_types:
      - {name: sim.8x, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1000000,
         on_demand_price: "32.77", spot_price: "9.83"}
pools:
  - {name: od, provider: sim, zones: [sim-1a], instance_types: [sim.8x], gpu_model: A100,
     gpus_per_node: 8, capacity_type: on_demand, min_nodes: $NODES, max_nodes: $NODES, idle_grace: 1h}
YAML
export TARMAC_DATABASE_URL=$DB
"$TARMAC" migrate --config "$WORK/c.yaml" >"$WORK/migrate.log" 2>&1 || { cat "$WORK/migrate.log" >&2; exit 1; }
ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name bench --role admin 2>/dev/null)
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.1
done
# The jobs as the API queues them, with a simulated run time (a field
# the sim provider reads and clients cannot send).
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, pool, sim_runtime_ms, submitted_ms)
        SELECT 'bench', 1, 1000, 'od', 3600000, (extract(epoch FROM now()) * 1000)::bigint
        FROM generate_series(1, $JOBS)" >/dev/null
for _ in $(seq 1 600); do
    [ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'running'")" = "$JOBS" ] && break
    sleep 0.1
done
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'running'")" = "$JOBS" ] \
    || { echo "run-logs: the $JOBS jobs never all ran" >&2; exit 1; }
psql_q "SELECT j.id, j.attempts, a.node_id FROM jobs j JOIN job_allocations a ON a.job_id = j.id
        WHERE j.state = 'running' ORDER BY j.id" | tr '|' ' ' >"$WORK/streams"

ticks() { # ticks() FROM_LINE TO_LINE: the leader ticks' took_ms between two points of serve.log
    sed -n "$1,$2p" "$WORK/serve.log" | sed -n 's/.*msg="tick done" took_ms=\([0-9.]*\) leader=1.*/\1/p'
}
p99() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } i = int(NR * 0.99); if (i < 1) i = 1; printf "%.2f", v[i] }'; }
p50() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } i = int((NR + 1) / 2); printf "%.2f", v[i] }'; }

# CPU time (clock ticks) of serve, and of the cluster's postmaster and its
# children (the backends of serve's pool live through the run).
cpu_of() { for p in "$@"; do sed 's/.*) //' "/proc/$p/stat" 2>/dev/null || true; done | awk '{ t += $12 + $13 } END { print t + 0 }'; }
PGPID=$(head -n 1 "$TM_PG_DIR/data/postmaster.pid")
cpu_serve() { cpu_of "$SERVE"; }
cpu_pg() { cpu_of "$PGPID" $(ps -o pid= --ppid "$PGPID"); }
L0=$(wc -l <"$WORK/serve.log")
sleep "$QUIET"
L1=$(wc -l <"$WORK/serve.log")
S1=$(cpu_serve); P1=$(cpu_pg)
python3 "$ROOT/bench/log_load.py" "http://127.0.0.1:$PORT" "$ADMIN" "$WORK/streams" "$DURATION" "$CHUNK" "$BATCH" \
    >"$WORK/load.out" 2>&1 || { cat "$WORK/load.out" >&2; exit 1; }
L2=$(wc -l <"$WORK/serve.log")
S2=$(cpu_serve); P2=$(cpu_pg)
STORED=$(psql_q "SELECT coalesce(sum(next_offset), 0) FROM job_log_streams")
res() { sed -n "s/^RESULT .*\\b$1=\\([^ ]*\\).*/\\1/p" "$WORK/load.out"; }
SECS=$(res seconds)
SENT=$(res bytes)
MBS=$(awk "BEGIN { printf \"%.1f\", $STORED / 1e6 / $SECS }")
ticks "$L0" "$L1" >"$WORK/ticks.quiet"
ticks "$L1" "$L2" >"$WORK/ticks.load"
QP99=$(p99 <"$WORK/ticks.quiet")
LP99=$(p99 <"$WORK/ticks.load")
RATIO=$(awk "BEGIN { if (\"$QP99\" == \"-\" || $QP99 == 0) print \"-\"; else printf \"%.2f\", $LP99 / $QP99 }")
HZ=$(getconf CLK_TCK)
SMS=$(awk "BEGIN { if ($STORED == 0) print \"-\"; else printf \"%.1f\", ($S2 - $S1) * 1000 / $HZ / ($STORED / 1e6) }")
PMS=$(awk "BEGIN { if ($STORED == 0) print \"-\"; else printf \"%.1f\", ($P2 - $P1) * 1000 / $HZ / ($STORED / 1e6) }")
MET=no
awk "BEGIN { exit !($MBS >= 50 && \"$RATIO\" != \"-\" && $RATIO <= 1.10) }" && MET=yes
# A batch whose index committed but whose answer came past the request's
# deadline is stored and not acknowledged: an agent resends it and is told
# the next offset.  Fewer bytes stored than acknowledged would be a loss.
if [ "$STORED" = "$SENT" ]; then
    CHECK="yes ($STORED bytes acknowledged = stored)"
elif [ "$STORED" -gt "$SENT" ]; then
    CHECK="yes ($SENT bytes acknowledged, all stored, and $((STORED - SENT)) more whose answer came too late)"
else
    CHECK="NO: $SENT acknowledged, $STORED stored"
fi

{
    echo "# Log ingest benchmark ($JOBS jobs writing at once)"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(uname -sr), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD -- controller bench migrations 2>/dev/null || echo ' (with local changes)')"
    echo "- command: BUILD=$BUILD JOBS=$JOBS TICK=$TICK QUIET=$QUIET DURATION=$DURATION CHUNK=$CHUNK BATCH=$BATCH POOL=$POOL STORE=$STORE bench/run-logs.sh"
    echo "- PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') from tests/lib/pg_cluster.sh (fsync and synchronous_commit off), serve's pool_size $POOL, everything on loopback and the same cores"
    echo "- load: bench/log_load.py, a thread and a connection per job, batches of $BATCH x $CHUNK random bytes; $(res requests) requests, $(res errors) refused, p50 $(res p50_ms) ms, p99 $(res p99_ms) ms"
    [ -z "$S3_NOTE" ] || echo "- bucket: $S3_NOTE; $(psql_q "SELECT count(*) FROM job_log_chunks") objects"
    echo "- ticks: leader ticks every $TICK, $(wc -l <"$WORK/ticks.quiet") in the quiet ${QUIET} s, $(wc -l <"$WORK/ticks.load") under load; p50 quiet $(p50 <"$WORK/ticks.quiet") ms, loaded $(p50 <"$WORK/ticks.load") ms (the p99 of some 40 ticks is their second slowest: on a shared machine, read it beside the p50)"
    echo "- CPU per MB stored under load: serve $SMS ms, PostgreSQL (postmaster and its children) $PMS ms"
    echo
    echo "| store | jobs | MB stored | seconds | MB/s stored | tick p99 quiet ms | tick p99 loaded ms | loaded/quiet | target (>= 50 MB/s, <= 1.10) |"
    echo "|:---|---:|---:|---:|---:|---:|---:|---:|:---|"
    echo "| $STORE | $JOBS | $(awk "BEGIN { printf \"%.1f\", $STORED / 1e6 }") | $SECS | $MBS | $QP99 | $LP99 | $RATIO | $MET |"
    [ "$STORE" = s3 ] || echo "| s3 | - | - | - | - | - | - | - | STORE=s3 (the S3 store's run) |"
    echo
    echo "Every acknowledged byte stored: $CHECK."
} | tee "$OUT"
