#!/usr/bin/env bash
# Alerts on the real binary: a queue older than 2 s fires one alert, POSTed
# to a loopback webhook that answers 500 twice, then 200: exactly three
# attempts, recorded; nothing more while it holds; cleared by cancelling the
# job (one resolved notice); a new queued job fires a new alert; a soft cap
# fires too; a restart resumes an undelivered notice with the attempts
# left; a notice is given up after its attempts, or at once on a 404; a
# paid pool left idle fires and is cleared by work.  The webhook URL (a
# secret in its path) never reaches the log, the rows or the decisions.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_alerts)
SECRET=hooks-T0SECRET-B0SECRET-XXXXXXXX
mkdir -p "$WORK/recv"
python3 "$TM_SOURCE_DIR/tests/lib/webhook_receiver.py" "$WORK/recv" --fail-first 2 \
    >"$WORK/recv.log" 2>&1 &
PIDS+=("$!")
wait_for 20 "[ -s '$WORK/recv/port' ]" || fail "the receiver did not start"
PORT=$(cat "$WORK/recv/port")

# No pool may grow (max_nodes 0), so a submitted job stays queued.
write_config "$WORK/c.yaml" 0 2s 1s 300ms
cat >>"$WORK/c.yaml" <<YAML
alerts:
  webhook_url: "http://127.0.0.1:$PORT/$SECRET"
  webhook_timeout: 2s
  webhook_attempts: 5
  webhook_backoff: 200ms
  queue_age_above: 2s
  soft_cap: true
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
# Count the ticks that record alerts: one tarmac_alerts call each.
psql_q "ALTER DATABASE itest_alerts SET track_functions = 'pl'"

posts() { wc -l <"$WORK/recv/posts.jsonl"; }
# post N FIELD: a field of the N-th POST (body fields as body.NAME).
post() {
    python3 - "$WORK/recv/posts.jsonl" "$1" "$2" <<'PY'
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]) - 1]
for part in sys.argv[3].split("."):
    rec = rec[part]
print(rec if not isinstance(rec, (dict, list)) else json.dumps(rec))
PY
}
ticks() {
    psql_q "SELECT coalesce((SELECT calls FROM pg_stat_user_functions
            WHERE funcname = 'tarmac_alerts'), 0)" | tail -n 1
}
# wait_ticks N: let N more alert ticks pass.
wait_ticks() {
    local from
    from=$(ticks)
    wait_for 60 "[ \$(ticks) -ge $(( from + $1 )) ]" || fail "the controller stopped ticking"
}
now_ms="(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
submit() {
    psql_q "INSERT INTO jobs (team, gpus, gpu_milli, class, submitted_ms) VALUES ('a', 1, 1000, 'train', $now_ms)
            RETURNING id"
}

start_serve() {
    "$TARMAC" serve --config "$WORK/c.yaml" >>"$WORK/serve.out" 2>>"$WORK/serve.log" &
    SERVE=$!
    PIDS+=("$SERVE")
}
# firing KIND: the tarmac_alerts_firing gauge of /metrics (checked by the
# strict exposition parser) for that kind.
firing() {
    local port
    port=$(grep -o 'api_port=[0-9]*' "$WORK/serve.log" | tail -n 1 | cut -d= -f2)
    curl -fsS -o "$WORK/metrics.txt" "http://127.0.0.1:$port/metrics" || fail "metrics"
    python3 "$TM_SOURCE_DIR/tests/lib/prom_parse.py" "$WORK/metrics.txt" >/dev/null || fail "metrics do not parse"
    sed -n "s/^tarmac_alerts_firing{kind=\"$1\"} //p" "$WORK/metrics.txt"
}
start_serve
wait_ticks 2
[ "$(posts)" = 0 ] || fail "an alert was sent with nothing queued: $(cat "$WORK/recv/posts.jsonl")"

# 1. A queued job, older than 2 s: one alert, three attempts (500, 500, 200).
JOB=$(submit)
wait_for 60 "[ \$(posts) -ge 3 ]" || fail "the alert was not delivered: $(posts) POSTs"
for n in 1 2 3; do
    [ "$(post $n body.alert)" = queue_age:train ] || fail "POST $n: $(post $n body)"
    [ "$(post $n body.state)" = firing ] || fail "POST $n state: $(post $n body)"
    [ "$(post $n path)" = "/$SECRET" ] || fail "POST $n path"
    [ "$(post $n content_type)" = application/json ] || fail "POST $n content type"
done
[ "$(post 1 code)" = 500 ] && [ "$(post 2 code)" = 500 ] && [ "$(post 3 code)" = 200 ] || fail "receiver codes"
[ "$(post 1 idempotency_key)" = "$(post 3 idempotency_key)" ] || fail "retries of one notice changed key"
[ "$(post 3 body.subject)" = train ] || fail "subject: $(post 3 body)"
[ "$(post 3 body.details.job)" = "$JOB" ] || fail "details: $(post 3 body)"
post 3 body.message | grep -q "the oldest queued train job ($JOB, team a) has waited" || fail "message: $(post 3 body)"
post 3 body.fired_at | grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$' || fail "fired_at: $(post 3 body)"
wait_for 20 "[ \"\$(psql_q \"SELECT attempts FROM alerts WHERE key = 'queue_age:train' AND delivered_ms IS NOT NULL\")\" = 3 ]" \
    || fail "row: $(psql_q 'SELECT * FROM alerts')"
[ "$(psql_q "SELECT last_error FROM alerts WHERE key = 'queue_age:train'")" = "HTTP 500" ] || fail "last_error"

# 2. It holds over many more ticks: nothing more is sent or recorded.
wait_ticks 10
[ "$(posts)" = 3 ] || fail "sent again while it holds: $(posts) POSTs"
[ "$(psql_q "SELECT count(*) FROM alerts")" = 1 ] || fail "recorded again: $(psql_q 'SELECT id, key FROM alerts')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'alert'")" = 1 ] || fail "alert decisions"
[ "$(psql_q "SELECT subject_kind || ':' || subject_id FROM decisions WHERE kind = 'alert'")" = "job:$JOB" ] \
    || fail "the decision is not filed under the oldest job"
[ "$(firing queue_age)" = 1 ] && [ "$(firing pool_idle)" = 0 ] || fail "metrics: $(grep alerts "$WORK/metrics.txt")"

# 3. Cancelled: resolved, one resolved notice, once.
psql_q "UPDATE jobs SET state = 'cancelled', finished_ms = $now_ms WHERE id = $JOB" >/dev/null
wait_for 30 "[ \$(posts) -ge 4 ]" || fail "no resolved notice"
[ "$(post 4 body.state)" = resolved ] && [ "$(post 4 body.alert)" = queue_age:train ] || fail "POST 4: $(post 4 body)"
[ "$(post 4 body.id)" = "$(post 3 body.id)" ] || fail "the resolved notice is for another alert"
wait_ticks 10
[ "$(posts)" = 4 ] || fail "resolved sent more than once: $(posts) POSTs"
[ "$(psql_q "SELECT resolve_attempts FROM alerts WHERE resolved_ms IS NOT NULL AND resolve_delivered_ms IS NOT NULL")" = 1 ] \
    || fail "resolved row: $(psql_q 'SELECT * FROM alerts')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'alert_resolved'")" = 1 ] || fail "resolved decision"
[ "$(firing queue_age)" = 0 ] || fail "metrics after resolution: $(grep alerts "$WORK/metrics.txt")"

# 4. A new queued job: a new alert (a new row), delivered at once.
JOB2=$(submit)
wait_for 30 "[ \$(posts) -ge 5 ]" || fail "no new alert"
[ "$(post 5 body.state)" = firing ] && [ "$(post 5 body.alert)" = queue_age:train ] || fail "POST 5: $(post 5 body)"
[ "$(post 5 body.details.job)" = "$JOB2" ] || fail "POST 5 job: $(post 5 body)"
[ "$(post 5 body.id)" != "$(post 3 body.id)" ] || fail "the new alert reused the old row"
[ "$(psql_q "SELECT count(*) FROM alerts WHERE key = 'queue_age:train'")" = 2 ] || fail "rows"
[ "$(psql_q "SELECT count(*) FROM alerts WHERE resolved_ms IS NULL")" = 1 ] || fail "firing rows"

# 5. Spend past a soft cap's warning (team a: $1.00 cap, warn at 10%,
#    50 cents spent this month on a node long gone); a hard cap passed
#    raises nothing.
psql_q "INSERT INTO budgets (scope_kind, scope, cap_cents, warn_percent, hard, updated_ms)
        VALUES ('team', 'a', 100, 10, false, 0), ('team', 'b', 100, 10, true, 0)" >/dev/null
NODE=$(psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli,
               memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms,
               terminated_ms, accrual_done)
               VALUES ('od', 'itest-gone-1', 'sim-1a', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand',
               'terminated', 0, 0, 0, 0, true) RETURNING id" | head -n 1)
psql_q "INSERT INTO spend (at_ms, period, node_id, pool, team, kind, cents)
        VALUES ($now_ms, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), $NODE, 'od', 'a', 'job', 50),
               ($now_ms, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), $NODE, 'od', 'b', 'job', 90)" >/dev/null
wait_for 30 "[ \$(posts) -ge 6 ]" || fail "no soft cap alert"
[ "$(post 6 body.alert)" = soft_cap:team:a ] && [ "$(post 6 code)" = 200 ] || fail "POST 6: $(post 6 body)"
[ "$(post 6 body.details.spent_cents)" = 50 ] || fail "soft cap details: $(post 6 body)"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'alert' AND subject_kind = 'budget' AND subject_id = 'team:a'")" = 1 ] \
    || fail "soft cap decision"
wait_ticks 5
[ "$(psql_q "SELECT count(*) FROM alerts WHERE kind = 'soft_cap'")" = 1 ] || fail "the hard cap alerted"

# 6. A restart resumes an undelivered notice: serve restarted with a backoff
#    of an hour makes one attempt at a new alert (the webhook answers 503)
#    and stops; the webhook recovers; the next serve sends it again, the
#    attempts counted on.
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
echo 503 >"$WORK/recv/fail"
sed -i 's/webhook_backoff: 200ms/webhook_backoff: 1h/' "$WORK/c.yaml"
before=$(posts)
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, class, submitted_ms) VALUES ('a', 1, 1000, 'eval', $now_ms)" >/dev/null
start_serve
wait_for 30 "[ \$(posts) -ge $(( before + 1 )) ]" || fail "the eval alert was not attempted"
[ "$(post $(( before + 1 )) body.alert)" = queue_age:eval ] || fail "POST: $(post $(( before + 1 )) body)"
wait_for 20 "[ \"\$(psql_q \"SELECT attempts FROM alerts WHERE key = 'queue_age:eval'\")\" = 1 ]" \
    || fail "first attempt not recorded"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM (a retry pending)"
: >"$WORK/recv/fail"
start_serve
wait_for 30 "[ \$(posts) -ge $(( before + 2 )) ]" || fail "the undelivered alert was not resumed after a restart"
[ "$(post $(( before + 2 )) body.alert)" = queue_age:eval ] && [ "$(post $(( before + 2 )) code)" = 200 ] \
    || fail "resumed POST: $(post $(( before + 2 )) body)"
wait_for 20 "[ \"\$(psql_q \"SELECT attempts FROM alerts WHERE key = 'queue_age:eval' AND delivered_ms IS NOT NULL\")\" = 2 ]" \
    || fail "resumed row: $(psql_q "SELECT * FROM alerts WHERE key = 'queue_age:eval'")"
[ "$(psql_q "SELECT count(*) FROM alerts WHERE key = 'queue_age:eval'")" = 1 ] || fail "the restart fired it again"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"

# 7. Giving up: a webhook answering 500 gets webhook_attempts (5) POSTs,
#    then none; one answering 404 gets one.  A notice given up is recorded
#    as such, and an alert never announced is not announced resolved.
sed -i 's/webhook_backoff: 1h/webhook_backoff: 100ms/' "$WORK/c.yaml"
echo 500 >"$WORK/recv/fail"
before=$(posts)
JOB4=$(psql_q "INSERT INTO jobs (team, gpus, gpu_milli, class, submitted_ms) VALUES ('a', 1, 1000, 'preprocess', $now_ms)
               RETURNING id")
start_serve
wait_for 30 "[ -n \"\$(psql_q \"SELECT given_up_ms FROM alerts WHERE key = 'queue_age:preprocess'\")\" ]" \
    || fail "never gave up: $(psql_q "SELECT * FROM alerts WHERE key = 'queue_age:preprocess'")"
[ "$(psql_q "SELECT attempts || ' ' || last_error || ' ' || (delivered_ms IS NULL) FROM alerts
             WHERE key = 'queue_age:preprocess'")" = "5 HTTP 500 true" ] || fail "given-up row"
[ "$(posts)" = $(( before + 5 )) ] || fail "$(( $(posts) - before )) POSTs for 5 attempts"
echo 404 >"$WORK/recv/fail"
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, class, submitted_ms) VALUES ('a', 1, 1000, 'inference', $now_ms)" >/dev/null
wait_for 30 "[ -n \"\$(psql_q \"SELECT given_up_ms FROM alerts WHERE key = 'queue_age:inference'\")\" ]" \
    || fail "a 404 was retried: $(psql_q "SELECT * FROM alerts WHERE key = 'queue_age:inference'")"
[ "$(psql_q "SELECT attempts || ' ' || last_error FROM alerts WHERE key = 'queue_age:inference'")" = "1 HTTP 404" ] \
    || fail "404 row"
: >"$WORK/recv/fail"
psql_q "UPDATE jobs SET state = 'cancelled', finished_ms = $now_ms WHERE id = $JOB4" >/dev/null
wait_for 30 "[ -n \"\$(psql_q \"SELECT resolved_ms FROM alerts WHERE key = 'queue_age:preprocess'\")\" ]" \
    || fail "not resolved"
wait_ticks 10
[ "$(posts)" = $(( before + 6 )) ] || fail "$(( $(posts) - before - 6 )) POSTs after giving up"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"

# 8. A paid pool left idle, with no webhook (alerts only recorded): a pool
#    kept at one node (min_nodes 1) that nothing uses fires pool_idle once
#    its billed node has been idle for the window; work placed on it clears
#    the alert.  Its own database, so the rows above stay apart.
DB_MAIN=$DB
DB=$(new_db itest_alerts_idle)
write_config "$WORK/idle.yaml" 1 2s 1s 300ms
sed -i '0,/min_nodes: 0/s//min_nodes: 1/' "$WORK/idle.yaml"
cat >>"$WORK/idle.yaml" <<YAML
alerts:
  pool_utilisation_below_percent: 50
  pool_utilisation_for: 1s
YAML
"$TARMAC" migrate --config "$WORK/idle.yaml" >/dev/null
"$TARMAC" serve --config "$WORK/idle.yaml" >>"$WORK/serve.out" 2>>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
wait_for 60 "[ \"\$(psql_q \"SELECT count(*) FROM alerts WHERE key = 'pool_idle:od'\")\" = 1 ]" \
    || fail "no pool_idle alert: $(psql_q 'SELECT id, state, billed_from_ms FROM nodes')"
[ "$(psql_q "SELECT attempts || ' ' || (delivered_ms IS NULL) FROM alerts WHERE key = 'pool_idle:od'")" = "0 true" ] \
    || fail "an alert was delivered with no webhook"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'alert' AND subject_kind = 'pool' AND subject_id = 'od'")" = 1 ] \
    || fail "pool_idle decision"
psql_q "SELECT details FROM alerts WHERE key = 'pool_idle:od'" | grep -q '"paid_gpus": 8' || fail "details"
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, pool, sim_runtime_ms, submitted_ms)
        VALUES ('a', 8, 1000, 'od', 600000, $now_ms)" >/dev/null
wait_for 60 "[ -n \"\$(psql_q \"SELECT resolved_ms FROM alerts WHERE key = 'pool_idle:od'\")\" ]" \
    || fail "the pool is used but the alert holds: $(psql_q 'SELECT id, state, node_id FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM alerts")" = 1 ] || fail "pool_idle recorded twice"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
DB=$DB_MAIN

# Only the leader records: a stale epoch is refused (TM001), and a key
# fires at most once whoever inserts.
psql_q "SELECT tarmac_alerts(0, 1, '[]'::jsonb, 5)" 2>"$WORK/stale.err" && fail "a stale epoch recorded alerts"
grep -q 'leader epoch 0 is stale' "$WORK/stale.err" || fail "stale epoch: $(cat "$WORK/stale.err")"
psql_q "INSERT INTO alerts (key, kind, subject, decision_subject_kind, decision_subject_id, message, fired_ms)
        VALUES ('queue_age:eval', 'queue_age', 'eval', 'job', '1', 'again', 1)" 2>/dev/null \
    && fail "a second firing row for one key was accepted"

# The webhook URL is a secret: not in the log, the rows or the decisions.
grep -q "$SECRET" "$WORK/serve.log" "$WORK/serve.out" && fail "the webhook URL was logged"
grep -q "127.0.0.1:$PORT" "$WORK/serve.log" && fail "the webhook address was logged"
[ "$(psql_q "SELECT count(*) FROM alerts WHERE last_error LIKE '%$SECRET%' OR details::text LIKE '%$SECRET%'")" = 0 ] \
    || fail "the webhook URL is in an alert row"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE reason LIKE '%$SECRET%' OR inputs::text LIKE '%$SECRET%'")" = 0 ] \
    || fail "the webhook URL is in a decision"
grep -q 'msg="alert firing" alert=queue_age:train' "$WORK/serve.log" || fail "no firing log line"
echo "1 passed, 0 failed"
