#!/usr/bin/env bash
# The agent's death, with the local provider: an agent killed with -9 and
# restarted re-adopts its running job, which then finishes once (one start,
# one exit, one attempt); an agent killed and not restarted makes its node
# unreachable, and its job runs again on another node, once.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

e2e_start itest_agent_restart
T=$WORK/marks
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own
# Each run appends its attempt, so a job run twice shows two lines.
J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"pool\":\"od\",\"command\":\"echo run \$TARMAC_ATTEMPT >> $T/a; sleep 15; echo done\"}")
wait_job "$J" running 40
N=$(node_of_job "$J")
wait_for 10 "[ -s $T/a ]" || fail "the job never ran"
P=$(agent_pid "$N")
[ "$P" != 0 ] || fail "no agent for node $N"
kill -9 "$P"
sleep 1
restart_agent "$N"
wait_for 10 '[ "$(agent_pid '"$N"')" != 0 ]' || fail "the agent did not come back"
wait_job "$J" succeeded 40
[ "$(wc -l <"$T/a")" = 1 ] || fail "the job ran more than once: $(cat "$T/a")"
[ "$(psql_q "SELECT attempts FROM jobs WHERE id = $J")" = 1 ] || fail "a re-adopted job counted another attempt"
psql_q "SELECT output_tail FROM jobs WHERE id = $J" | grep -qx done || fail "the re-adopted job's tail"

# Killed and not restarted: unreachable, then requeued and run elsewhere once.
# A file per attempt: the attempts run under different users, and a job's
# files are its own (umask 077).
K=$(submit "{\"team\":\"vision\",\"gpus\":2,\"pool\":\"od\",\"command\":\"echo run \$TARMAC_ATTEMPT >> $T/b.\$TARMAC_ATTEMPT; sleep 300\"}")
wait_job "$K" running 40
N2=$(node_of_job "$K")
wait_for 10 "[ -s $T/b.1 ]" || fail "the second job never ran"
P=$(agent_pid "$N2")
kill -9 "$P"
wait_for 20 "[ -n \"\$(psql_q \"SELECT unreachable_ms FROM nodes WHERE id = $N2\")\" ]" \
    || fail "node $N2 not marked unreachable"
wait_for 40 "[ \"\$(psql_q \"SELECT state || ' ' || coalesce(node_id, 0) FROM jobs WHERE id = $K\")\" != 'running $N2' ] && [ \"\$(psql_q \"SELECT state FROM jobs WHERE id = $K\")\" = running ]" \
    || fail "job $K not running elsewhere: $(psql_q "SELECT state, node_id, attempts FROM jobs WHERE id = $K")"
wait_for 10 "[ \"\$(cat $T/b.* | grep -c run)\" = 2 ]" || fail "the job did not run again: $(cat "$T"/b.*)"
sleep 2
[ "$(cat "$T"/b.* | grep -c run)" = 2 ] || fail "the job ran more than twice: $(cat "$T"/b.*)"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind LIKE '%unreachable%' AND subject_id = '$N2'")" -ge 1 ] \
    || fail "no unreachable decision for node $N2: $(psql_q "SELECT kind, subject_id FROM decisions ORDER BY id DESC LIMIT 8")"
api POST "/v1/jobs/$K/cancel" '{}' >/dev/null
secrets_absent
echo "1 passed, 0 failed"
