#!/usr/bin/env bash
# A gang bought whole on the GCP fake (every request checked against the
# Compute v1 discovery document): a job on 2 nodes, us-central1-a
# exhausted (ZONE_RESOURCE_POOL_EXHAUSTED).  instances.bulkInsert is not
# used yet: the set goes one insert at a time in one zone and is deleted
# whole if one fails.  Here the zone refuses the set: nothing kept, one
# decision, the shortage remembered; the next pass buys the whole set in
# us-central1-b and the gang runs there on both nodes.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"

export TARMAC_SIM_AGENT=1
gcp_fake_start
DB=$(new_db itest_gang_gcp)
write_gcp_config "$WORK/c.yaml" gang 3 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
gcp_control '{"exhaust": {"us-central1-a": "all"}}' >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/gang.out" 2>"$WORK/gang.log" || fail "serve failed"

[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'pool' AND jsonb_array_length(inputs -> 'nodes') = 2")" = 1 ] \
    || fail "want one launch_failed decision naming the set's 2 nodes: $(psql_q "SELECT kind, subject_kind, subject_id, reason FROM decisions WHERE kind LIKE 'launch%'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-central1-a' AND state = 'terminated' AND instance_id IS NULL AND billed_from_ms IS NULL")" = 2 ] \
    || fail "the refused set was not given up whole: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-central1-b' AND billed_from_ms IS NOT NULL")" = 2 ] \
    || fail "the set was not bought in us-central1-b: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
grep -q 'msg="gcp capacity short, remembered".*zone=us-central1-a' "$WORK/gang.log" \
    || fail "no shortage remembered for us-central1-a"
grep -q 'msg="launch set refused for capacity".*nodes=2 provider=gcp .*zone=us-central1-a' "$WORK/gang.log" \
    || fail "no capacity refusal logged for the set"
sleep 1
gcp_check_cloud gang idle
gcp_no_violations
gcp_no_secrets
echo "gang of 2 on the GCP fake: us-central1-a exhausted, nothing kept (one decision), bought whole in us-central1-b"
echo "1 passed, 0 failed"
