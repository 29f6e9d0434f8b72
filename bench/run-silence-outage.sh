#!/usr/bin/env bash
# bench/run-silence-outage.sh: running jobs lost across an outage of the
# control plane.  A throwaway PostgreSQL (tests/lib/pg_cluster.sh), `tarmac
# serve` with the local provider (tests/lib/agent_e2e.sh: every node a real
# `tarmac agent`, every job a real process), JOBS jobs of 2 GPUs on JOBS
# nodes; then the outage: MODE db cuts the database off from `tarmac
# serve` (a TCP proxy killed, started again after OUTAGE seconds), MODE
# restart stops `tarmac serve` (SIGTERM) and starts it again after OUTAGE
# seconds.  Once every agent has been heard again (and SETTLE seconds
# more), a job is lost when its first process is gone, it ran a second
# attempt, or it is no longer running.  Prints one line:
#
#   mode=db outage_s=600 jobs=3 lost=0 requeued=0 unreachable_marked=0 ...
#
#   bench/run-silence-outage.sh
#
# Environment: BUILD (default build), MODE (db), OUTAGE seconds (600),
# JOBS (3, at most 3), and the agent timings UNREACHABLE (2m), REQUEUE
# (5m), TERMINATE (15m), HEARTBEAT (10s): the defaults are the shipped
# defaults (config/tarmac.example.yaml, the agent's --heartbeat-period).
# SETTLE (10).  Not a ctest test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
MODE=${MODE:-db}
OUTAGE=${OUTAGE:-600}
JOBS=${JOBS:-3}
SETTLE=${SETTLE:-10}
HEARTBEAT=${HEARTBEAT:-10s}
[ -x "$BUILD/tarmac" ] || { echo "run-silence-outage: build first ($BUILD/tarmac missing)" >&2; exit 2; }
{ [ "$JOBS" -ge 1 ] && [ "$JOBS" -le 3 ]; } || { echo "run-silence-outage: JOBS is 1 to 3" >&2; exit 2; }

PGDIR=$(mktemp -d /tmp/tarmac-bench-silence-pg.XXXXXX)
chmod 755 "$PGDIR"
"$ROOT/tests/lib/pg_cluster.sh" start "$PGDIR" >/dev/null
export TM_BIN=$BUILD/tarmac TM_SOURCE_DIR=$ROOT TM_TEST_STATE=$PGDIR
export E2E_UNREACHABLE_AFTER=${UNREACHABLE:-2m} E2E_REQUEUE_AFTER=${REQUEUE:-5m}
export E2E_TERMINATE_AFTER=${TERMINATE:-15m}
export E2E_AGENT_ARGS="--heartbeat-period $HEARTBEAT --sample-period $HEARTBEAT --kill-grace 2s"
# shellcheck disable=SC1091
. "$ROOT/tests/lib/itest.sh"
# shellcheck disable=SC1091
. "$ROOT/tests/lib/agent_e2e.sh"
# itest.sh's cleanup, and this script's PostgreSQL with it.
eval "itest_$(declare -f cleanup)"
cleanup() {
    itest_cleanup
    "$ROOT/tests/lib/pg_cluster.sh" stop "$PGDIR" >/dev/null 2>&1 || true
    rm -rf "$PGDIR"
}

name=bench_silence_$MODE
if [ "$MODE" = db ]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    start_proxy() {
        python3 "$ROOT/tests/lib/tcp_proxy.py" "$port" 127.0.0.1 "$PGPORT" >"$WORK/proxy.out" 2>&1 &
        proxy=$!; PIDS+=("$proxy")
        wait_for 10 'grep -q ready "$WORK/proxy.out"' || fail "proxy did not start"
    }
    start_proxy
    E2E_SERVE_ARGS="--database-url postgresql://postgres@127.0.0.1:$port/$name"
fi
e2e_start "$name"
T=$WORK/marks
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own
ids=()
for k in $(seq "$JOBS"); do
    ids+=("$(submit "{\"team\":\"bench\",\"gpus\":2,\"pool\":\"od\",\"command\":\"echo run \$TARMAC_ATTEMPT >> $T/$k; echo \$\$ > $T/$k.pid; sleep 100000\"}")")
done
for J in "${ids[@]}"; do wait_job "$J" running 120; done
pids=()
for k in $(seq "$JOBS"); do
    wait_for 30 "[ -s $T/$k.pid ]" || fail "job $k never ran"
    pids+=("$(cat "$T/$k.pid")")
done
sleep 2

start=$(date +%s)
if [ "$MODE" = db ]; then
    kill -9 "$proxy"
    sleep "$OUTAGE"
    start_proxy
else
    kill -TERM "$SERVE"
    wait "$SERVE" || true
    sleep "$OUTAGE"
    e2e_serve
fi
took=$(( $(date +%s) - start ))
back_ms=$(psql_q "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
wait_for 300 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE last_heartbeat_ms > $back_ms\")\" -ge $JOBS ]" \
    || echo "run-silence-outage: not every agent was heard again" >&2
heard_s=$(( ($(psql_q "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint") - back_ms) / 1000 ))
sleep "$SETTLE"

lost=0
k=0
for J in "${ids[@]}"; do
    k=$((k + 1))
    if ! kill -0 "${pids[$((k - 1))]}" 2>/dev/null || [ "$(wc -l <"$T/$k")" != 1 ] ||
        [ "$(psql_q "SELECT state || ' ' || attempts FROM jobs WHERE id = $J")" != "running 1" ]; then
        lost=$((lost + 1))
    fi
done
requeued=$(psql_q "SELECT count(*) FROM job_interruptions WHERE cause = 'unreachable'")
marked=$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'node_unreachable'")
echo "mode=$MODE outage_s=$took jobs=$JOBS lost=$lost requeued=$requeued unreachable_marked=$marked" \
     "agents_heard_again_after_s=$heard_s unreachable_after=$E2E_UNREACHABLE_AFTER requeue_after=$E2E_REQUEUE_AFTER" \
     "heartbeat=$HEARTBEAT binary=$BUILD/tarmac"
