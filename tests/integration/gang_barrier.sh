#!/usr/bin/env bash
# A gang's start barrier (docs/multi-node.md), with the local provider: one
# node's agent is stopped (SIGSTOP: its node stays ready, it never hears of
# the job) and a 3-node job is placed on it and two others.  The two that
# came claim the attempt and wait; past agent.gang_start_timeout (3 s here)
# the whole gang is requeued, the decision naming the node that did not
# come, and no member's command ever ran.  Once the agent runs again, every
# member of one attempt starts, together, and the job succeeds.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# Silence alone must not requeue anything in this test: only the barrier.
E2E_OD_MIN=3
E2E_IDLE_GRACE=120s
E2E_UNREACHABLE_AFTER=90s
E2E_REQUEUE_AFTER=100s
E2E_TERMINATE_AFTER=120s
E2E_AGENT_YAML="  gang_start_timeout: 3s"
e2e_start itest_gang_barrier
T=$WORK/gang
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
cat >"$T/job.sh" <<SH
echo "\$TARMAC_ATTEMPT \$TARMAC_NODE_RANK \$(date +%s%3N)" >"$T/start.\$TARMAC_ATTEMPT.\$TARMAC_NODE_RANK"
SH
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 3 ]" || fail "the pool's 3 nodes never came up"
# Every agent has heard from the controller once (no fencing ahead).
wait_for 10 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready' AND last_heartbeat_ms IS NOT NULL\")\" = 3 ]" \
    || fail "the nodes never sent a heartbeat"
C=$(psql_q "SELECT max(id) FROM nodes WHERE state = 'ready'")
CA=$(agent_pid "$C")
[ "$CA" -gt 0 ] || fail "node $C has no agent"
kill -STOP "$CA"
J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":3,\"pool\":\"od\",\"command\":\"sh $T/job.sh\"}")

wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM decisions WHERE kind = 'requeue' AND subject_id = '$J' AND inputs ->> 'cause' = 'gang_start'\")\" -ge 1 ]" \
    || { kill -CONT "$CA"; fail "the gang was never requeued for its missing member: $(psql_q "SELECT kind, reason FROM decisions WHERE subject_id = '$J' ORDER BY id"); $(psql_q "SELECT * FROM job_members WHERE job_id = $J")"; }
WHY=$(psql_q "SELECT reason FROM decisions WHERE kind = 'requeue' AND subject_id = '$J' AND inputs ->> 'cause' = 'gang_start' ORDER BY id LIMIT 1")
echo "$WHY" | grep -q "node(s) $C did not claim attempt 1" || { kill -CONT "$CA"; fail "the decision does not name node $C: $WHY"; }
[ "$(psql_q "SELECT inputs ->> 'absent_nodes' FROM decisions WHERE kind = 'requeue' AND subject_id = '$J' AND inputs ->> 'cause' = 'gang_start' ORDER BY id LIMIT 1")" = "$C" ] \
    || { kill -CONT "$CA"; fail "absent_nodes should be $C"; }
# Attempt 1: the two nodes that came claimed it; none started.
[ "$(psql_q "SELECT count(*) FROM job_members WHERE job_id = $J AND attempt = 1 AND node_id <> $C")" = 2 ] \
    && [ "$(psql_q "SELECT count(*) FROM job_members WHERE job_id = $J AND attempt = 1 AND (node_id = $C OR started_ms IS NOT NULL)")" = 0 ] \
    || { kill -CONT "$CA"; fail "attempt 1's claims: $(psql_q "SELECT * FROM job_members WHERE job_id = $J")"; }
[ "$(psql_q "SELECT count(*) FROM job_interruptions WHERE job_id = $J AND attempt = 1 AND cause = 'gang_start'")" = 1 ] \
    || { kill -CONT "$CA"; fail "attempt 1 should leave once, for gang_start: $(psql_q "SELECT * FROM job_interruptions WHERE job_id = $J")"; }
sleep 1
if ls "$T" | grep -q '^start\.'; then
    kill -CONT "$CA"
    fail "a member's command ran while node $C never came: $(cat "$T"/start.*)"
fi

kill -CONT "$CA"
wait_job "$J" succeeded 60
N=$(psql_q "SELECT attempts FROM jobs WHERE id = $J")
[ "$N" -ge 2 ] || fail "the job should have needed a second attempt, ran $N"
# Only the last attempt ran, on every rank.
[ "$(ls "$T" | grep '^start\.' | sort | tr '\n' ' ')" = "start.$N.0 start.$N.1 start.$N.2 " ] \
    || fail "starts: $(ls "$T" | grep '^start\.'), want attempt $N's 3 ranks only"
api GET "/v1/jobs/$J" | python3 -c '
import json, sys
m = json.load(sys.stdin)["members"]
assert [x["rank"] for x in m] == [0, 1, 2] and all(x["exit_code"] == 0 for x in m), m' \
    || fail "GET /v1/jobs/$J members: $(api GET "/v1/jobs/$J")"
TARMAC_TOKEN=$ADMIN "$TARMAC" why job "$J" --url "$BASE" >"$WORK/why.out" 2>&1 || fail "why: $(cat "$WORK/why.out")"
grep -q "did not claim" "$WORK/why.out" || fail "why job does not show the barrier's requeue: $(cat "$WORK/why.out")"
secrets_absent
echo "1 passed, 0 failed"
