#!/usr/bin/env bash
# A node that cannot be fenced (the provider says fence: false): its agent
# is killed with -9, its job (which ignores SIGTERM) left running.  The job
# is requeued only past agent.fence_after (8 s here, decision
# unreachable_requeue naming it), never fenced; then the agent comes back
# (restarted from its state.json, which re-adopts the job) and kills the
# stale job before anything else: nothing new starts on the node until that
# process is gone (asserted on its pid and the times it died and the next
# job started).  One node at most, so the new work lands on it.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# A process runs (a zombie does not: it is gone, only not yet reaped by
# whoever adopted it once its agent died).
alive() {
    local s
    s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

E2E_PROVIDER_YAML="    fence: false"
E2E_AGENT_YAML="  fence_after: 8s"
E2E_OD_MAX=1
# A long grace: on SIGTERM the stale job would outlive the test.
E2E_AGENT_ARGS="--heartbeat-period 1s --sample-period 1s --kill-grace 60s"
e2e_start itest_fence_return
T=$WORK/ret
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own
X=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"trap '' TERM; date +%s%3N > $T/x.\$TARMAC_ATTEMPT.start; echo \$\$ > $T/x.\$TARMAC_ATTEMPT; while :; do sleep 0.2; done\"}")
wait_job "$X" running 40
wait_for 10 "[ -s $T/x.1 ]" || fail "job $X never started its process"
XP=$(cat "$T/x.1")
A=$(node_of_job "$X")
AGENT=$(agent_pid "$A")
[ "$AGENT" -gt 0 ] || fail "node $A has no agent"
kill -9 "$AGENT"
KILLED=$(date +%s%3N)
# New work while the node is silent: it waits (no other node may come).
Y=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"date +%s%3N > $T/y.start; sleep 300\"}")

wait_job "$X" queued 40
REQUEUED=$(date +%s%3N)
alive "$XP" || fail "the stale process died before its agent came back"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'fence'")" = 0 ] || fail "a node that cannot be fenced was fenced"
R=$(psql_q "SELECT reason FROM decisions WHERE kind = 'requeue' AND subject_id = '$X'")
echo "$R" | grep -q 'agent.fence_after' || fail "the requeue does not name the bound: $R"
[ "$(psql_q "SELECT (inputs ->> 'silent_ms')::bigint >= 8000 FROM decisions WHERE kind = 'requeue' AND subject_id = '$X'")" = t ] \
    || fail "requeued before agent.fence_after: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'requeue' AND subject_id = '$X'")"
# Silence counts from the last heartbeat, up to a period (1 s) before the kill.
[ $((REQUEUED - KILLED)) -ge 7000 ] || fail "requeued $((REQUEUED - KILLED)) ms after the agent died, before the 8 s bound"

( while alive "$XP"; do sleep 0.05; done; date +%s%3N >"$T/x.dead" ) &
PIDS+=($!)
restart_agent "$A"
wait_job "$Y" running 40
wait_for 10 "[ -s $T/y.start ]" || fail "job $Y never started"
wait_for 5 "[ -s $T/x.dead ]" || fail "the returning agent left the stale job $XP running"
[ "$(cat "$T/x.dead")" -le "$(cat "$T/y.start")" ] \
    || fail "job $Y started at $(cat "$T/y.start"), before the stale job's process died at $(cat "$T/x.dead")"
grep -q 'stale job from before this node fell silent' "$(node_dir "$A")/agent.log" \
    || fail "the agent did not say it killed the stale job"
wait_job "$X" running 40
wait_for 10 "[ -s $T/x.2 ]" || fail "job $X's attempt 2 never started its process"
[ "$(cat "$T/x.dead")" -le "$(cat "$T/x.2.start")" ] || fail "attempt 2 started before attempt 1 died"
secrets_absent
echo "1 passed, 0 failed"
