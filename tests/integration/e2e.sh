#!/usr/bin/env bash
# End to end on the sim cloud in real time: submit, tick, nodes launched and
# ready, jobs placed and run by the sim agent, finished, nodes released after
# their idle grace; every step explained in decisions.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_e2e)
write_config "$WORK/c.yaml" 3 2s 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3s --estimate 5s >/dev/null
"$TARMAC" submit --config "$WORK/c.yaml" --team a --gpus 2 --runtime 2s --count 3 >/dev/null
"$TARMAC" submit --config "$WORK/c.yaml" --team b --gpu-milli 300 --runtime 2s --count 4 --preemptible >/dev/null

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
grep -q 'became leader' "$WORK/serve.log" || fail "never led"
grep -q '"leader": true' "$WORK/serve.out" || fail "stats: $(cat "$WORK/serve.out")"
"$TARMAC" summary --config "$WORK/c.yaml" --output json | grep -Eq '"succeeded":[[:space:]]*8' || fail "summary"
"$TARMAC" decisions --config "$WORK/c.yaml" --subject node:1 --output json | grep -Eq '"kind":[[:space:]]*"launch"' || fail "decisions filter"
echo "1 passed, 0 failed"
