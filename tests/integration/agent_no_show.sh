#!/usr/bin/env bash
# A pool whose nodes never enroll (controller/reconcile/no_show.c), end to
# end: `tarmac serve` with the local provider whose bootstraps point the
# agents at a wrong controller URL (a port nobody listens on), two queued
# jobs of one node each.  Every node launched runs an agent that never
# reaches the controller, is given up on after its boot allowance and is
# terminated; the pool backs off, so in NOSHOW_SECONDS (default 30) it
# launches a bounded number of nodes (counted from the nodes table), the
# pool_no_show alert fires once, each hold is one launch_held decision,
# and `tarmac why job N` names the hold; a controller restarted during a
# hold launches nothing before the hold's end (the run is read from the
# database, not remembered).  Without the backoff the same window
# launches a node per job about every 5 s.
#
# NOSHOW_SECONDS, NOSHOW_BOOT_ALLOWANCE, NOSHOW_UNREACHABLE, NOSHOW_REQUEUE,
# NOSHOW_TERMINATE, NOSHOW_BACKOFF, NOSHOW_BACKOFF_MAX and NOSHOW_MAX_NODES
# (the most nodes allowed in the window) change the timings, e.g. to
# measure with longer ones; the count is printed first.  NOSHOW_KEYS=0
# leaves the agent.no_show_* keys out of the config (a build without them).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

SECONDS_WINDOW=${NOSHOW_SECONDS:-30}
BOOT=${NOSHOW_BOOT_ALLOWANCE:-2s}
UNREACHABLE=${NOSHOW_UNREACHABLE:-1s}
REQUEUE=${NOSHOW_REQUEUE:-2s}
TERMINATE=${NOSHOW_TERMINATE:-4s}
BACKOFF=${NOSHOW_BACKOFF:-3s}
BACKOFF_MAX=${NOSHOW_BACKOFF_MAX:-12s}
LIMIT=${NOSHOW_MAX_NODES:-7}

DB=$(new_db itest_agent_no_show)
STATE=$WORK/local
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
# A port that was free a moment ago and that nobody listens on: the
# agents' enrollment is refused, as behind a wrong URL or a firewall.
WRONG=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: e2e
listen: "127.0.0.1:$PORT"
tick_interval: 300ms
log_level: info
scheduler:
  policy: fifo
api:
  rate_per_token: 100000
  burst: 1000000
agent:
  controller_url: "http://127.0.0.1:$WRONG"
  unreachable_after: $UNREACHABLE
  requeue_after: $REQUEUE
  terminate_after: $TERMINATE
  boot_allowance: $BOOT
$([ "${NOSHOW_KEYS:-1}" = 0 ] || printf '  no_show_backoff: %s\n  no_show_backoff_max: %s\n  no_show_alert_after: 3' "$BACKOFF" "$BACKOFF_MAX")
providers:
  - name: here
    kind: local
    region: local
    state_dir: "$STATE"
    metadata: none
    agent_args: "$E2E_AGENT_ARGS"
    instance_types:
      - name: local.2x
        gpus: 2
        gpu_model: A100
        cpu_milli: 8000
        memory_mib: 16384
        on_demand_price: "2.00"
        spot_price: "0.60"
pools:
  - name: od
    provider: here
    zones: [local-a]
    instance_types: [local.2x]
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: 4
    idle_grace: 2s
    bootstrap: "$TM_SOURCE_DIR/config/bootstrap-local.sh"
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name e2e-admin --role admin 2>>"$WORK/token.log") \
    || fail "token create"
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
trap 'e2e_cleanup; cleanup' EXIT
trap 'exit 143' TERM INT HUP
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"
wait_for 30 "grep -q 'became leader' $WORK/serve.log" || fail "the controller never became leader"

A=$(submit '{"team":"vision","gpus":2,"pool":"od","command":"true"}')
B=$(submit '{"team":"vision","gpus":2,"pool":"od","command":"true"}')
wait_for 20 "[ \"\$(psql_q 'SELECT count(*) FROM nodes')\" -ge 1 ]" || fail "no node was launched"
FIRST=$(psql_q "SELECT min(requested_ms) FROM nodes")
sleep "$SECONDS_WINDOW"
N=$(psql_q "SELECT count(*) FROM nodes WHERE requested_ms < $FIRST + $SECONDS_WINDOW * 1000")
HEARD=$(psql_q "SELECT count(*) FROM nodes WHERE last_heartbeat_ms IS NOT NULL")
echo "nodes launched in ${SECONDS_WINDOW}s for 2 jobs (boot_allowance $BOOT, backoff $BACKOFF..$BACKOFF_MAX): $N"
[ "$HEARD" = 0 ] || fail "$HEARD nodes enrolled through a wrong controller URL"
[ "$N" -le "$LIMIT" ] || fail "$N nodes launched in ${SECONDS_WINDOW}s for 2 jobs (at most $LIMIT with the backoff): \
$(psql_q "SELECT id, requested_ms - $FIRST, state FROM nodes ORDER BY id")"
[ "$N" -ge 4 ] || fail "only $N nodes: the pool must launch again after each hold"

# One alert for the episode, naming the pool and what to check.
[ "$(psql_q "SELECT count(*) FROM alerts WHERE key = 'pool_no_show:od'")" = 1 ] \
    || fail "alert pool_no_show:od: $(psql_q "SELECT key, message FROM alerts")"
psql_q "SELECT message FROM alerts WHERE key = 'pool_no_show:od'" | grep -q 'agent.controller_url' \
    || fail "the alert does not say what to check"
# Each hold is one decision with its inputs, not one per tick.
HOLDS=$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_held' AND subject_id = 'od'")
ENDS=$(psql_q "SELECT count(DISTINCT inputs ->> 'until_ms') FROM decisions WHERE kind = 'launch_held'")
[ "$HOLDS" -ge 1 ] && [ "$HOLDS" = "$ENDS" ] || fail "launch_held decisions: $HOLDS for $ENDS holds"
psql_q "SELECT inputs ->> 'no_shows', inputs ->> 'backoff_ms' FROM decisions WHERE kind = 'launch_held'" \
    | grep -q '|' || fail "launch_held without its inputs"

# A waiting job says why: the hold, in `tarmac why`.
wait_for 20 "psql_q \"SELECT state_reason FROM jobs WHERE id IN ($A, $B) AND state = 'queued'\" | grep -q 'never enrolled'" \
    || fail "no queued job names the hold: $(psql_q "SELECT id, state, state_reason FROM jobs")"
J=$(psql_q "SELECT id FROM jobs WHERE id IN ($A, $B) AND state_reason LIKE '%never enrolled%' LIMIT 1")
WHY=$(TARMAC_URL=$BASE TARMAC_TOKEN=$ADMIN "$TARMAC" why job "$J") || fail "tarmac why job $J"
echo "$WHY" | grep -Eq 'pool od: [0-9]+ nodes launched in a row never enrolled .*next launch held until [0-9:]+ UTC \(backoff [0-9]+ (s|min)\)' \
    || fail "tarmac why job $J does not name the hold: $WHY"

# A restart during a hold continues it: nothing is launched before its end.
now_ms() { date +%s%3N; }
wait_for 30 "[ \"\$(psql_q \"SELECT coalesce(max((inputs ->> 'until_ms')::bigint), 0) FROM decisions WHERE kind = 'launch_held'\")\" -gt \$((\$(now_ms) + 2000)) ]" \
    || fail "no hold of 2 s or more ahead to restart in"
UNTIL=$(psql_q "SELECT max((inputs ->> 'until_ms')::bigint) FROM decisions WHERE kind = 'launch_held'")
kill "$SERVE"
wait "$SERVE" 2>/dev/null || true
RESTART=$(now_ms)
"$TARMAC" serve --config "$WORK/c.yaml" >>"$WORK/serve.out" 2>>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
wait_for 30 "[ \$(grep -c 'became leader' $WORK/serve.log) -ge 2 ]" || fail "the restarted controller never became leader"
wait_for $(( (UNTIL - RESTART) / 1000 + 10 )) "[ \"\$(psql_q 'SELECT count(*) FROM nodes WHERE requested_ms > $RESTART')\" -ge 1 ]" \
    || fail "nothing launched after the hold's end"
EARLY=$(psql_q "SELECT count(*) FROM nodes WHERE requested_ms > $RESTART AND requested_ms < $UNTIL")
echo "restarted $((UNTIL - RESTART)) ms before the hold's end; first launch after it $(( $(psql_q "SELECT min(requested_ms) FROM nodes WHERE requested_ms > $RESTART") - UNTIL )) ms after the end"
[ "$EARLY" = 0 ] || fail "$EARLY nodes launched after the restart before the hold's end ($((UNTIL - RESTART)) ms after it)"
echo "1 passed, 0 failed"
