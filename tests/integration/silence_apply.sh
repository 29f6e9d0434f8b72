#!/usr/bin/env bash
# tarmac_apply's silence_hold op (migrations/0016_silence.sql) on a real
# PostgreSQL: the decision is recorded once per episode (the same since_ms
# on every pass while the provider is held back), again for a later
# episode, under the leader epoch; the rest of the plan is applied as
# before.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_silence_apply)
write_config "$WORK/c.yaml" 0
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
psql_q "UPDATE leader SET epoch = 1" >/dev/null
hold() { # since_ms
    echo "{\"op\":\"silence_hold\",\"provider\":\"sim\",\"since_ms\":$1,\"reason\":\"8 of 10 silent\",\"inputs\":{\"silent_nodes\":8}}"
}
plan="{\"actions\":[$(hold 1000)]}"
for now in 2000 2300 2600; do
    psql_q "SELECT tarmac_apply(1, $now, '$plan'::jsonb)" >/dev/null || fail "apply at $now"
done
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'silence_hold'")" = 1 ] \
    || fail "one episode, $(psql_q "SELECT count(*) FROM decisions WHERE kind = 'silence_hold'") decisions"
[ "$(psql_q "SELECT subject_kind || ':' || subject_id || ':' || at_ms || ':' || (inputs ->> 'since_ms') || ':' || (inputs ->> 'silent_nodes') FROM decisions WHERE kind = 'silence_hold'")" = "provider:sim:2000:1000:8" ] \
    || fail "decision: $(psql_q "SELECT * FROM decisions WHERE kind = 'silence_hold'")"
# A later episode: a new decision.
plan="{\"actions\":[$(hold 5000)]}"
R=$(psql_q "SELECT tarmac_apply(1, 6000, '$plan'::jsonb) ->> 'applied'")
[ "$R" = 1 ] || fail "a new episode applied $R"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'silence_hold'")" = 2 ] || fail "second episode not recorded"
# A stale epoch is refused.
psql_q "SELECT tarmac_apply(0, 7000, '$plan'::jsonb)" >/dev/null 2>"$WORK/stale.log" && fail "a stale epoch applied"
grep -q "epoch" "$WORK/stale.log" || fail "stale epoch: $(cat "$WORK/stale.log")"
# The other ops go on to the functions before: a plan of only other ops,
# and one mixing them, are applied as before (a wait records its reason).
psql_q "INSERT INTO jobs (id, team, gpus, gpu_milli, state, submitted_ms) VALUES (1, 't', 1, 1000, 'queued', 1)" >/dev/null
plan="{\"actions\":[$(hold 5000),{\"op\":\"wait\",\"job\":1,\"reason\":\"no capacity\",\"inputs\":{}}]}"
R=$(psql_q "SELECT tarmac_apply(1, 8000, '$plan'::jsonb)")
[ "$(psql_q "SELECT state_reason FROM jobs WHERE id = 1")" = "no capacity" ] || fail "the wait was not applied: $R"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'silence_hold'")" = 2 ] || fail "a replay recorded again"
echo "1 passed, 0 failed"
