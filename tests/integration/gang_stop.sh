#!/usr/bin/env bash
# A gang's members are stopped together (docs/multi-node.md, migrations/
# 0026), with the local provider: the agents heartbeat every 3 s, spread a
# second apart, as on a cloud where nodes boot apart.  A checkpointable
# 3-node job running on them is checkpointed (tarmac_apply's checkpoint op,
# as the reconcile pass applies it): every rank records when it got the
# checkpoint signal.  Each member's agent hears of the stop at its own next
# heartbeat, up to 2 s after another's; every rank must still get the
# signal within much less than that of the others (the common stop time),
# and the job is requeued for its next attempt.  Then a member's agent is
# stopped (SIGSTOP: it never hears) and the job is cancelled: the other
# members are stopped regardless, within a heartbeat period and the slack.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
E2E_AGENT_ARGS="--heartbeat-period 3s --sample-period 3s --kill-grace 2s"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# Agents stopped for a while must not be taken for silent.
E2E_OD_MIN=3
E2E_IDLE_GRACE=120s
E2E_UNREACHABLE_AFTER=60s
E2E_REQUEUE_AFTER=90s
E2E_TERMINATE_AFTER=120s
e2e_start itest_gang_stop
T=$WORK/gang
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
# Each rank writes start.ATTEMPT.RANK, then waits (wait returns on a
# signal at once, sleep would not); on SIGTERM (the agents' checkpoint
# signal) it writes sig.ATTEMPT.RANK with the wall time in ms and exits.
cat >"$T/job.sh" <<SH
a=\$TARMAC_ATTEMPT r=\$TARMAC_NODE_RANK
trap 'date +%s%3N >"$T/sig.\$a.\$r"; exit 0' TERM
echo \$\$ >"$T/start.\$a.\$r"
while :; do sleep 1 & wait \$!; done
SH
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready' AND last_heartbeat_ms IS NOT NULL\")\" = 3 ]" \
    || fail "the pool's 3 nodes never came up"
AGENTS=()
for n in $(psql_q "SELECT id FROM nodes WHERE state = 'ready' ORDER BY id"); do AGENTS+=("$(agent_pid "$n")"); done
# The gang's start puts its members' heartbeats in step (they all ask at
# the common start): spread them again, 1 s apart over the 3 s period.
spread() {
    kill -STOP "${AGENTS[@]}"
    sleep 3
    for a in "${AGENTS[@]}"; do
        kill -CONT "$a"
        sleep 1
    done
}
started() { [ "$(ls "$T" | grep -c "^start\.$1\.")" = 3 ]; }

J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":3,\"pool\":\"od\",\"checkpointable\":true,\"command\":\"sh $T/job.sh\"}")
wait_for 60 "started 1" || fail "the gang's members never all started: $(ls "$T")"
spread
# The heartbeats are spread: the next three fall about 1 s apart.
HB=$(psql_q "SELECT max(last_heartbeat_ms) - min(last_heartbeat_ms) FROM nodes WHERE state = 'ready'")
[ "$HB" -ge 1000 ] || fail "the agents' heartbeats should be spread, they are $HB ms apart"
S=$(psql_q "SELECT started_ms FROM jobs WHERE id = $J")
N0=$(psql_q "SELECT min(node_id) FROM job_allocations WHERE job_id = $J")
E=$(psql_q "SELECT epoch FROM leader WHERE id = 1")
R=$(psql_q "SELECT tarmac_apply($E, $(date +%s%3N), '{\"actions\":[{\"op\":\"checkpoint\",\"job\":$J,\"node\":$N0,\"started_ms\":$S,\"reason\":\"preempted by a test\"}]}'::jsonb) ->> 'applied'")
[ "$R" = 1 ] || fail "the checkpoint was not applied: $R"
wait_for 30 "[ \"\$(ls $T | grep -c '^sig\.1\.')\" = 3 ]" \
    || fail "not every rank got the checkpoint signal: $(ls "$T"); $(psql_q "SELECT * FROM gang_stops")"
SPREAD=$(cat "$T"/sig.1.* | sort -n | awk 'NR == 1 {a = $1} {b = $1} END {print b - a}')
echo "checkpoint signal spread over the 3 ranks: $SPREAD ms (heartbeats 3 s, 1 s apart)"
# One agent's heartbeat alone is 1 s from the next: the ranks must be much
# closer than that (they are tens of ms apart where each is signalled at
# the common time).
[ "$SPREAD" -lt 700 ] || fail "the ranks got the checkpoint signal $SPREAD ms apart: $(cat "$T"/sig.1.*)"
[ "$(psql_q "SELECT count(*) FROM gang_stops WHERE job_id = $J AND attempt = 1")" = 1 ] \
    || fail "no common stop recorded: $(psql_q "SELECT * FROM gang_stops")"
[ "$(psql_q "SELECT count(*) FROM job_interruptions WHERE job_id = $J AND attempt = 1 AND cause = 'checkpoint'")" = 1 ] \
    || fail "attempt 1 should leave once, as a checkpoint: $(psql_q "SELECT * FROM job_interruptions WHERE job_id = $J")"

# A member whose agent never hears does not hold the others.
wait_for 60 "started 2" || fail "attempt 2 never started on every rank: $(ls "$T"); $(psql_q "SELECT state, attempts FROM jobs WHERE id = $J")"
spread
LAST=$(psql_q "SELECT max(node_id) FROM job_allocations WHERE job_id = $J")
LA=$(agent_pid "$LAST")
kill -STOP "$LA"
api POST "/v1/jobs/$J/cancel" '{}' >/dev/null
wait_job "$J" cancelled 10
wait_for 15 "[ \"\$(ls $T | grep -c '^sig\.2\.')\" = 2 ]" \
    || { kill -CONT "$LA"; fail "the members whose agents run were not stopped: $(ls "$T")"; }
SPREAD=$(cat "$T"/sig.2.* | sort -n | awk 'NR == 1 {a = $1} {b = $1} END {print b - a}')
[ "$SPREAD" -lt 700 ] || { kill -CONT "$LA"; fail "the two ranks got their signal $SPREAD ms apart"; }
kill -CONT "$LA"
wait_for 15 "[ \"\$(ls $T | grep -c '^sig\.2\.')\" = 3 ]" || fail "the last member was not stopped once its agent ran again: $(ls "$T")"
secrets_absent
echo "1 passed, 0 failed"
