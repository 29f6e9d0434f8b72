#!/usr/bin/env bash
# Faults against the loopback Compute Engine fake (tests/lib/gcp_fake.py):
#  1. spot capacity exhausted in the first zone (ZONE_RESOURCE_POOL_
#     EXHAUSTED_WITH_DETAILS in the insert operation): the launch falls back
#     to the next zone in the same pass and the shortage is remembered; two
#     429s and two 503s on the way are retried with backoff;
#  2. a preempted spot VM (STOPPING, then deleted with a
#     compute.instances.preempted operation) becomes an interrupted node and
#     its job is requeued and finishes; the token revoked at the same time
#     costs one fresh token, not the auth gate;
#  3. no private key, token or JWT in any log line or decision; every
#     request valid against the discovery document.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"

export TARMAC_SIM_AGENT=1
gcp_fake_start

# ---- 1. a zone exhausted: the next zone in the same pass ------------------
DB=$(new_db itest_gcp_fallback 2>/dev/null)
write_gcp_config "$WORK/f.yaml" fallback 2 1s 200ms
"$TARMAC" migrate --config "$WORK/f.yaml" >/dev/null 2>&1
# Also two 429s and two 503s on the way: retried with backoff inside the budget.
gcp_control '{"exhaust": {"us-central1-a": "spot"}, "throttle": 2, "fail5xx": 2}' >/dev/null
"$TARMAC" db submit --config "$WORK/f.yaml" --team b --gpus 8 --runtime 2s --preemptible >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/f.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/fallback.out" 2>"$WORK/fallback.log" || fail "serve failed"
grep -q 'msg="gcp capacity short, remembered".*zone=us-central1-a market=spot code=ZONE_RESOURCE_POOL_EXHAUSTED' \
    "$WORK/fallback.log" || fail "the exhausted zone was not remembered"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone <> 'us-central1-a' AND instance_id LIKE 'us-central1-b/%'")" -ge 1 ] \
    || [ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id LIKE 'us-central1-b/%'")" -ge 1 ] \
    || fail "no node in the next zone: $(psql_q 'SELECT id, zone, instance_id, state FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = 1 ] || fail "the job did not run"
gcp_control '{"exhaust": {}}' >/dev/null
grep -q 'msg="gce call will be retried".*http=429' "$WORK/fallback.log" || fail "no retry after a 429"
grep -q 'msg="gce call will be retried".*http=503' "$WORK/fallback.log" || fail "no retry after a 503"
gcp_check_cloud fallback idle
echo "zone exhausted: us-central1-a remembered short, launched in us-central1-b, job succeeded"

# ---- 2. preemption requeues work ------------------------------------------
GCP_DBS="${GCP_DBS:-} $DB"
DB=$(new_db itest_gcp_preempt 2>/dev/null)
write_gcp_config "$WORK/p.yaml" preempt 2 1s 200ms
"$TARMAC" migrate --config "$WORK/p.yaml" >/dev/null 2>&1
"$TARMAC" db submit --config "$WORK/p.yaml" --team b --gpus 8 --runtime 4s --preemptible >/dev/null
"$TARMAC" serve --config "$WORK/p.yaml" --exit-when-idle --max-wall 50s \
    >"$WORK/preempt.out" 2>"$WORK/preempt.log" &
serve=$!; PIDS+=("$serve")
wait_for 30 "[ \"\$(psql_q \"SELECT count(*) FROM jobs WHERE state = 'running'\")\" = 1 ]" \
    || fail "the job never ran: $(psql_q 'SELECT id, state FROM jobs')"
# The token is revoked at the same moment: a 401, one fresh token, no gate.
gcp_control '{"preempt_all_spot": true, "revoke_tokens": true}' | grep -q '"preempted": \["' \
    || fail "nothing to preempt"
wait "$serve" || fail "serve failed"
grep -q 'gce answered 401, fetching a new token once' "$WORK/preempt.log" || fail "no new token after a 401"
if grep -q 'gcp refused our credentials' "$WORK/preempt.log"; then fail "a revoked token closed the auth gate"; fi
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state = 'interrupted'")" -ge 1 ] \
    || fail "no interrupted node: $(psql_q 'SELECT id, state, state_reason FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded' AND attempts >= 2")" = 1 ] \
    || fail "the job was not requeued and finished: $(psql_q 'SELECT id, state, attempts FROM jobs')"
gcp_check_cloud preempt idle
echo "preemption: node interrupted, job requeued and succeeded on attempt $(psql_q 'SELECT attempts FROM jobs')"

# ---- 3. secrets and validation --------------------------------------------
gcp_no_secrets
gcp_no_violations
echo "1 passed, 0 failed"
