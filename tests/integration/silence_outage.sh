#!/usr/bin/env bash
# Running work survives the control plane: with real agents (local
# provider), an outage longer than agent.requeue_after, then back, requeues
# nothing and stops no job process.  MODE db: the database is cut off from
# `tarmac serve` (a proxy killed and started again); MODE restart:
# `tarmac serve` is stopped and started again.  Silence the controller
# could not hear is not held against the nodes (controller/reconcile/
# staleness.c, hearing_since_ms).
#
# The timings: the agents retry with backoff up to --retry-max (4 s here,
# 60 s by default), so each is heard again within that and a heartbeat
# once the controller is back, and the API may answer 503 for a moment
# after the leader's own connection is back (its pool reconnects on its
# own backoff).  The outage (28 s, 25 s) is longer than
# agent.requeue_after (20 s), which is longer than the agents' longest
# wait plus a heartbeat: the rule docs/silence.md gives for the defaults.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

MODE=${1:?db or restart}
OUTAGE=28
[ "$MODE" = db ] || OUTAGE=25
export E2E_UNREACHABLE_AFTER=3s E2E_REQUEUE_AFTER=20s E2E_TERMINATE_AFTER=60s
export E2E_AGENT_ARGS="--heartbeat-period 1s --sample-period 1s --kill-grace 2s --retry-max 4s"
name=itest_silence_$MODE

if [ "$MODE" = db ]; then
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    start_proxy() {
        python3 "$TM_SOURCE_DIR/tests/lib/tcp_proxy.py" "$port" 127.0.0.1 "$PGPORT" >"$WORK/proxy.out" 2>&1 &
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
# Two jobs on two nodes; each run appends its attempt and keeps its pid.
declare -A JOB PID
for k in a b; do
    JOB[$k]=$(submit "{\"team\":\"vision\",\"gpus\":2,\"pool\":\"od\",\"command\":\"echo run \$TARMAC_ATTEMPT >> $T/$k; echo \$\$ > $T/$k.pid; sleep 600\"}")
done
for k in a b; do wait_job "${JOB[$k]}" running 60; done
wait_for 15 "[ -s $T/a.pid ] && [ -s $T/b.pid ]" || fail "the jobs never ran"
sleep 2
for k in a b; do PID[$k]=$(cat "$T/$k.pid"); done

before=$(date +%s)
if [ "$MODE" = db ]; then
    kill -9 "$proxy"                     # the database is gone
    sleep "$OUTAGE"
    kill -0 "$SERVE" 2>/dev/null || fail "the controller died while the database was away"
    start_proxy                          # and back
else
    kill -TERM "$SERVE"
    wait "$SERVE" || fail "unclean stop"
    sleep "$OUTAGE"
    e2e_serve
fi
back_ms=$(psql_q "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
echo "outage: $(( $(date +%s) - before )) s (agent.requeue_after 20 s)"

# Both agents heard again, and a few ticks more: nothing was requeued or
# stopped.
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE last_heartbeat_ms > $back_ms\")\" -ge 2 ]" \
    || fail "the agents were not heard again: $(psql_q 'SELECT id, state, last_heartbeat_ms FROM nodes')"
sleep 3
for k in a b; do
    kill -0 "${PID[$k]}" 2>/dev/null || fail "job $k's process (pid ${PID[$k]}) was stopped"
    [ "$(wc -l <"$T/$k")" = 1 ] || fail "job $k ran again: $(tr '\n' ' ' <"$T/$k")"
done
for J in "${JOB[@]}"; do
    [ "$(psql_q "SELECT state || ' ' || attempts FROM jobs WHERE id = $J")" = "running 1" ] \
        || fail "job $J: $(psql_q "SELECT state, attempts, state_reason FROM jobs WHERE id = $J")"
done
n=$(psql_q "SELECT count(*) FROM decisions WHERE kind IN ('unreachable_requeue', 'requeue') OR reason LIKE '%unreachable%requeue%'")
[ "$n" = 0 ] || fail "jobs were requeued: $(psql_q "SELECT kind, subject_id, reason FROM decisions WHERE reason LIKE '%requeue%'")"
[ "$(psql_q "SELECT count(*) FROM job_interruptions")" = 0 ] \
    || fail "interruptions recorded: $(psql_q 'SELECT * FROM job_interruptions')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE unreachable_ms IS NOT NULL")" = 0 ] \
    || fail "a node is still unreachable"
grep -q 'became leader' "$WORK/serve.log" || fail "no leader"
for J in "${JOB[@]}"; do api POST "/v1/jobs/$J/cancel" '{}' >/dev/null; done
echo "1 passed, 0 failed"
