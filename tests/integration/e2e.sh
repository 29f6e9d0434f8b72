#!/usr/bin/env bash
# End to end on the sim cloud in real time: submit, tick, nodes launched and
# ready, jobs placed and run by the sim agent, finished, nodes released after
# their idle grace; every step explained in decisions.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_e2e)
write_config "$WORK/c.yaml" 3 2s 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3s --estimate 5s >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 2 --runtime 2s --count 3 >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpu-milli 300 --runtime 2s --count 4 --preemptible >/dev/null

timeout 90 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 80s --output json \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"

[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = 8 ] || fail "not every job succeeded: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] || fail "nodes left: $(psql_q 'SELECT id, state FROM nodes')"
# Growth for preemptible work went to the spot pool (the scheduler may still
# use free on-demand GPUs for it); non-preemptible work never runs on spot.
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'spot' AND capacity_type = 'spot'")" -ge 1 ] \
    || fail "no spot node was launched for the preemptible work"
[ "$(psql_q "SELECT count(*) FROM jobs j JOIN nodes n ON n.id = j.node_id WHERE NOT j.preemptible AND n.capacity_type = 'spot'")" = 0 ] \
    || fail "non-preemptible work ran on spot"
for kind in launch ready place job_succeeded terminate terminated; do
    [ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = '$kind'")" -gt 0 ] || fail "no '$kind' decision"
done
# Every decision has a reason; each node was requested with its token first.
[ "$(psql_q "SELECT count(*) FROM decisions WHERE reason = ''")" = 0 ] || fail "decision without reason"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id IS NULL")" = 0 ] || fail "node without instance"
# The simulated cloud agrees: one instance per node row, none left running.
[ "$(psql_q "SELECT count(*) FROM simcloud.instances")" = "$(psql_q 'SELECT count(*) FROM nodes')" ] \
    || fail "cloud instances and node rows differ"
# The spend ledger: every node's cost split between the teams that used it
# and idle time for the pool, charged cents plus carried sub-cent
# remainders equal to its exact cost; and the ledger cannot be rewritten.
wrong=$(psql_q "SELECT count(*) FROM nodes n WHERE n.billed_from_ms IS NOT NULL
                AND abs((SELECT coalesce(sum(cents), 0) * 10000 FROM spend s WHERE s.node_id = n.id)
                      + (SELECT coalesce(sum(uusd), 0) FROM spend_carry c WHERE c.node_id = n.id)
                      - n.price_uusd_per_hour::numeric * (n.terminated_ms - n.billed_from_ms) / 3600000) > 0.001")
[ "$wrong" = 0 ] || fail "$wrong nodes charged other than their cost: $(psql_q 'SELECT node_id, kind, team, cents FROM spend')"
# Team a's 8-GPU job ran 3 s on a $32.77/h node: whole cents.  Team b's four
# 0.3-GPU jobs ran 2 s each: about 0.02 cents, still carried for it.
[ "$(psql_q "SELECT coalesce(sum(cents), 0) FROM spend WHERE team = 'a'")" -ge 2 ] || fail "team a not charged"
[ "$(psql_q "SELECT count(*) FROM spend_carry WHERE team = 'b' AND uusd > 0")" -ge 1 ] \
    || [ "$(psql_q "SELECT count(*) FROM spend WHERE team = 'b'")" -ge 1 ] || fail "team b's use not recorded"
[ "$(psql_q "SELECT count(*) FROM spend WHERE kind = 'idle' AND team IS NULL")" -ge 1 ] || fail "no idle time charged"
psql_q "UPDATE spend SET cents = 0" 2>/dev/null && fail "the ledger was rewritten"
grep -q 'became leader' "$WORK/serve.log" || fail "never led"
grep -q '"leader": true' "$WORK/serve.out" || fail "stats: $(cat "$WORK/serve.out")"
"$TARMAC" db summary --config "$WORK/c.yaml" --output json | grep -Eq '"succeeded":[[:space:]]*8' || fail "summary"
"$TARMAC" db decisions --config "$WORK/c.yaml" --subject node:1 --output json | grep -Eq '"kind":[[:space:]]*"launch"' || fail "decisions filter"
echo "1 passed, 0 failed"
