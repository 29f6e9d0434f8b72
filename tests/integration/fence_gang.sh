#!/usr/bin/env bash
# Fencing a gang with the local provider: a 2-node checkpointable gang runs,
# one member's agent is killed with -9 (its job process left running).  The
# silent node is fenced (terminated through the provider) and the gang is
# requeued whole only once the provider confirms it gone, so the next
# attempt never starts while the old member's process runs (asserted on its
# pid and the times each process started and died).  Each attempt has its
# own checkpoint folder and the next resumes from the newest complete one
# (TARMAC_CHECKPOINT_DIR, TARMAC_RESUME_DIR).  The other member's attempt-1
# process is stopped, the gang runs its second attempt once, and the API
# lists its two nodes by rank.  Prints the time from the kill to the next
# attempt running.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# A process runs (a zombie does not: it is gone, only not yet reaped by
# whoever adopted it once its agent died).
alive() {
    local s
    s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}

# A third node stands ready, so the next attempt has room at once; empty
# nodes are not released for a minute: only fencing may stop the old
# member's process, not the silent node's idle release.
E2E_OD_MIN=3
E2E_IDLE_GRACE=60s
e2e_start itest_fence_gang
starts() { cat "$T"/start.* 2>/dev/null; }
T=$WORK/gang
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
# Each member: a file start.PID holding "attempt pid start_ms
# checkpoint_dir resume_dir" (starts() reads them all); the
# first attempt writes a complete checkpoint (marker renamed in last); then
# it runs until stopped.
cat >"$T/job.sh" <<SH
d="\$TARMAC_CHECKPOINT_DIR"
mkdir -p "\$d"
echo "\$TARMAC_ATTEMPT \$\$ \$(date +%s%3N) \$d \${TARMAC_RESUME_DIR:-none}" >"$T/start.\$\$"
if [ "\$TARMAC_ATTEMPT" = 1 ]; then
    echo step-100 >"\$d/state.\$\$"
    echo ok >"\$d/.complete.\$\$" && mv "\$d/.complete.\$\$" "\$d/COMPLETE"
fi
while :; do sleep 0.2; done
SH
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 3 ]" || fail "the pool's 3 nodes never came up"
J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":2,\"pool\":\"od\",\"checkpointable\":true,\"command\":\"sh $T/job.sh\"}")
wait_job "$J" running 60
wait_for 30 "[ \"\$(starts | grep -c '^1 ')\" = 2 ]" || fail "the gang's 2 members never started: $(starts)"

# The member on the first node of the gang: its agent and its process.
A=$(psql_q "SELECT min(node_id) FROM job_allocations WHERE job_id = $J")
AD=$(node_dir "$A")
AGENT=$(agent_pid "$A")
[ "$AGENT" -gt 0 ] || fail "node $A has no agent"
starts >"$WORK/starts.now"
P=$(python3 - "$AD" "$WORK/starts.now" <<'PY'
import sys
mark = ("TM_LOCAL_NODE_DIR=" + sys.argv[1]).encode()
for line in open(sys.argv[2]):
    att, pid = line.split()[:2]
    try:
        if att == "1" and mark in open("/proc/%s/environ" % pid, "rb").read().split(b"\0"):
            print(pid)
            break
    except OSError:
        pass
PY
)
[ -n "$P" ] || fail "no process of the gang found on node $A"
kill -9 "$AGENT"
KILLED=$(date +%s%3N)
sleep 0.5
alive "$P" || fail "the job process $P died with its agent: nothing left to fence"
( while alive "$P"; do sleep 0.05; done; date +%s%3N >"$T/dead" ) &
PIDS+=($!)

wait_for 60 "[ \"\$(starts | grep -c '^2 ')\" = 2 ]" \
    || fail "the gang's next attempt never started on 2 members: $(starts); $(psql_q "SELECT kind, subject_id, reason FROM decisions WHERE kind IN ('fence', 'requeue', 'node_unreachable') ORDER BY id")"
FIRST2=$(starts | awk '$1 == 2 {print $3}' | sort -n | head -1)
[ -s "$T/dead" ] || fail "attempt 2 started at $FIRST2 while attempt 1's process $P on node $A still runs"
DEAD=$(cat "$T/dead")
[ "$DEAD" -le "$FIRST2" ] || fail "attempt 2 started at $FIRST2, before attempt 1's process $P died at $DEAD"

# Fenced with its reason, requeued whole, once.
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'fence' AND subject_id = '$A'")" = 1 ] \
    || fail "no fence decision for node $A: $(psql_q "SELECT kind, subject_id FROM decisions ORDER BY id")"
psql_q "SELECT reason FROM decisions WHERE kind = 'fence' AND subject_id = '$A'" | grep -q 'confirms the instance terminated' \
    || fail "the fence decision does not say why"
[ "$(psql_q "SELECT count(*) FROM job_interruptions WHERE job_id = $J AND attempt = 1")" = 1 ] \
    || fail "attempt 1 should leave once: $(psql_q "SELECT * FROM job_interruptions WHERE job_id = $J")"
[ "$(psql_q "SELECT state FROM nodes WHERE id = $A")" = terminated ] || fail "node $A is not terminated"

# A checkpoint folder per attempt; attempt 2 resumes from attempt 1's.
CK=$WORK/ckpt/job-$J
starts | awk '$1 == 1 {print $4, $5}' | sort -u | grep -qx "$CK/attempt-1 none" \
    || fail "attempt 1's folders: $(starts)"
[ "$(starts | awk '$1 == 2 {print $4, $5}' | sort -u)" = "$CK/attempt-2 $CK/attempt-1" ] \
    || fail "attempt 2 should checkpoint into $CK/attempt-2 and resume from $CK/attempt-1: $(starts)"
[ -f "$CK/attempt-1/COMPLETE" ] || fail "attempt 1's checkpoint is not complete"

# The member that kept its agent was stopped, not left running beside
# attempt 2; attempt 2 runs once, on two nodes with ranks 0 and 1, node A
# not among them (GET /v1/jobs/ID lists every node of the gang by rank).
for pid in $(starts | awk '$1 == 1 {print $2}'); do
    alive "$pid" && fail "attempt 1's process $pid still runs beside attempt 2"
done
sleep 2
[ "$(psql_q "SELECT state, attempts FROM jobs WHERE id = $J")" = "running|2" ] \
    || fail "the gang should run its second attempt, once: $(psql_q "SELECT state, attempts FROM jobs WHERE id = $J")"
[ "$(starts | grep -c '^2 ')" = 2 ] && [ "$(starts | grep -c '^3 ')" = 0 ] || fail "starts: $(starts)"
api GET "/v1/jobs/$J" | python3 -c '
import json, sys
j = json.load(sys.stdin)
m = j["members"]
assert [x["rank"] for x in m] == [0, 1] and all(x["attempt"] == 2 and x["started_ms"] for x in m), m
assert int(sys.argv[1]) not in [x["node_id"] for x in m], m' "$A" \
    || fail "GET /v1/jobs/$J members: $(api GET "/v1/jobs/$J")"

echo "figure: gang running again $((FIRST2 - KILLED)) ms after kill -9 of a member's agent (attempt 1 process gone $((DEAD - KILLED)) ms after)"
api POST "/v1/jobs/$J/cancel" '{}' >/dev/null
secrets_absent
echo "1 passed, 0 failed"
