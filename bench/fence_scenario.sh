#!/usr/bin/env bash
# bench/fence_scenario.sh KIND: one node failure, measured (run by
# bench/run-fence.sh, which sets the test environment).  The local
# provider, real agents, 3 ready nodes; a job (KIND single: 1 node; gang:
# 2 nodes) runs, then one of its nodes' agent is killed with -9, its job
# process left running.  Prints one line:
#   result kind=KIND run_again_ms=N old_gone_ms=M overlap_ms=O
# run_again_ms: from the kill to the first process of the next attempt;
# old_gone_ms: from the kill to the old process's end (-1: still running
# 60 s after the next attempt started); overlap_ms: how long both ran.
# Test timings: unreachable_after 3s, requeue_after 5s, terminate_after
# 30s (tests/lib/agent_e2e.sh), idle_grace 60s.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"
KIND=${1:?single or gang}
alive() {
    local s
    s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}
E2E_OD_MIN=3
E2E_IDLE_GRACE=60s
e2e_start "bench_fence_$KIND" >/dev/null
T=$WORK/b
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
starts() { cat "$T"/start.* 2>/dev/null; }
echo "echo \"\$TARMAC_ATTEMPT \$\$ \$(date +%s%3N)\" >$T/start.\$\$; while :; do sleep 0.2; done" >"$T/job.sh"
wait_for 60 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 3 ]" || fail "3 nodes never ready"
N=1; [ "$KIND" = gang ] && N=2
J=$(submit "{\"team\":\"b\",\"gpus\":2,\"nodes\":$N,\"pool\":\"od\",\"command\":\"sh $T/job.sh\"}")
wait_for 60 "[ \"\$(starts | grep -c '^1 ')\" = $N ]" || fail "attempt 1 never ran"
A=$(psql_q "SELECT min(node_id) FROM job_allocations WHERE job_id = $J")
AD=$(node_dir "$A")
starts >"$T/starts"
P=$(python3 - "$AD" "$T/starts" <<'PY'
import sys
mark = ("TM_LOCAL_NODE_DIR=" + sys.argv[1]).encode()
for line in open(sys.argv[2]):
    att, pid = line.split()[:2]
    try:
        if att == "1" and mark in open("/proc/%s/environ" % pid, "rb").read().split(b"\0"):
            print(pid)
    except OSError:
        pass
PY
)
kill -9 "$(agent_pid "$A")"
KILLED=$(date +%s%3N)
( while alive "$P"; do sleep 0.05; done; date +%s%3N >"$T/dead" ) &
PIDS+=($!)
wait_for 120 "starts | grep -q '^2 '" || fail "attempt 2 never ran"
AGAIN=$(starts | awk '$1 == 2 {print $3}' | sort -n | head -1)
wait_for 60 "[ -s $T/dead ]" || true
if [ -s "$T/dead" ]; then
    DEAD=$(cat "$T/dead")
    GONE=$((DEAD - KILLED))
    OVER=$((DEAD > AGAIN ? DEAD - AGAIN : 0))
else
    GONE=-1
    OVER=$(( $(date +%s%3N) - AGAIN ))
fi
echo "result kind=$KIND run_again_ms=$((AGAIN - KILLED)) old_gone_ms=$GONE overlap_ms=$OVER"
