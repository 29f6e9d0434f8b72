#!/usr/bin/env bash
# Stopping jobs for real with the local provider: cancel kills the whole
# process tree (a child that forked a grandchild included), a job that
# ignores SIGTERM is killed after the agent's grace (2 s here), and fake
# GPUs at 0 % under a running job raise the idle report (gpu_idle decision).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# A long idle grace: the stubborn job must meet the agent's grace, not
# the node's release.
E2E_IDLE_GRACE=30s
e2e_start itest_agent_kill local "" 0 "idle_gpu:
  threshold: 5
  window: 2s"
T=$WORK/tree
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own
# A child that forks a grandchild, each recording its pid, all waiting.
TREE=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"sh -c 'sleep 300 & echo \$! > $T/grandchild; wait' & echo \$! > $T/child; wait\"}")
STUBBORN=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"trap '' TERM; echo \$\$ > $T/stubborn; while :; do sleep 0.2; done\"}")
wait_job "$TREE" running 40
wait_job "$STUBBORN" running 10
wait_for 20 "[ -s $T/grandchild ] && [ -s $T/child ] && [ -s $T/stubborn ]" || fail "the jobs never started their processes"
C=$(cat "$T/child"); G=$(cat "$T/grandchild"); S=$(cat "$T/stubborn")
kill -0 "$C" && kill -0 "$G" && kill -0 "$S" || fail "the job processes are not alive"

# Fake GPUs at 0 % under running jobs: the idle report names the job.
wait_for 30 "[ \"\$(psql_q \"SELECT count(*) FROM decisions WHERE kind = 'gpu_idle' AND subject_id IN ('$TREE', '$STUBBORN')\")\" -ge 1 ]" \
    || fail "no gpu_idle decision for an allocated GPU at 0 %: $(psql_q "SELECT kind, subject_id FROM decisions ORDER BY id DESC LIMIT 5")"

api POST "/v1/jobs/$TREE/cancel" '{}' >/dev/null
wait_for 10 "! kill -0 $C 2>/dev/null && ! kill -0 $G 2>/dev/null" \
    || fail "cancel left the tree alive: child $(kill -0 "$C" 2>/dev/null && echo alive), grandchild $(kill -0 "$G" 2>/dev/null && echo alive)"
wait_job "$TREE" cancelled 5

START=$(date +%s%3N)
api POST "/v1/jobs/$STUBBORN/cancel" '{}' >/dev/null
wait_for 15 "! kill -0 $S 2>/dev/null" || fail "a job ignoring SIGTERM survived the grace"
END=$(date +%s%3N)
# It outlived SIGTERM (ignored), and died once the 2 s grace ran out.
[ $((END - START)) -ge 1500 ] || fail "the stubborn job died after $((END - START)) ms, before the grace"
secrets_absent
echo "1 passed, 0 failed"
