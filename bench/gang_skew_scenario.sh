#!/usr/bin/env bash
# bench/gang_skew_scenario.sh GANGS SIZE: how far apart a gang's members
# start (run by bench/run-gang-skew.sh, which sets the test environment).
# The local provider, real agents (heartbeat period $HEARTBEAT), SIZE
# ready nodes; GANGS jobs of SIZE nodes submitted at once, one running at
# a time.  Each member writes the time its command started, waits until
# every rank of its job has started (at most 60 s), and exits 0.  Prints
# one line per gang:
#   result job=ID skew_ms=N
# skew_ms: from the first rank's command start to the last's (-1: a rank
# never started).
# The local provider starts every node's agent at the same moment, so their
# heartbeats would fall in step, as they never do on a cloud where nodes
# boot minutes apart: with SPREAD=1 (the default) the agents' heartbeats
# are spread evenly over the period first (every agent stopped for a
# period, then each let go a period/SIZE after the one before).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
E2E_AGENT_ARGS="--heartbeat-period ${HEARTBEAT:-10s} --sample-period 10s --kill-grace 2s"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"
GANGS=${1:?gangs}
SIZE=${2:?nodes per gang}
E2E_OD_MIN=$SIZE
E2E_OD_MAX=$SIZE
E2E_IDLE_GRACE=600s
# stopped agents must not be taken for silent
E2E_UNREACHABLE_AFTER=60s
E2E_REQUEUE_AFTER=90s
E2E_TERMINATE_AFTER=120s
e2e_start "bench_gang_skew" >/dev/null
T=$WORK/b
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
cat >"$T/job.sh" <<SH
echo "\$(date +%s%3N)" >"$T/s.\$TARMAC_JOB_ID.\$TARMAC_NODE_RANK"
i=0
while [ "\$(ls $T | grep -c "^s\.\$TARMAC_JOB_ID\.")" -lt $SIZE ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done
SH
wait_for 120 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready' AND last_heartbeat_ms IS NOT NULL\")\" = $SIZE ]" \
    || fail "$SIZE nodes never ready"
if [ "${SPREAD:-1}" = 1 ]; then
    HB_MS=$(python3 -c 'import sys; v = sys.argv[1]; print(int(float(v[:-2]) if v.endswith("ms") else float(v.rstrip("s")) * 1000))' "${HEARTBEAT:-10s}")
    AGENTS=()
    for n in $(psql_q "SELECT id FROM nodes WHERE state = 'ready' ORDER BY id"); do AGENTS+=("$(agent_pid "$n")"); done
    # Stopped for a whole period first, so that every agent's heartbeat is
    # due when it is let go and its next one falls where it was let go.
    kill -STOP "${AGENTS[@]}"
    sleep "$(python3 -c "print($HB_MS / 1000)")"
    for a in "${AGENTS[@]}"; do
        kill -CONT "$a"
        sleep "$(python3 -c "print($HB_MS / $SIZE / 1000)")"
    done
    sleep 1
fi
JOBS=()
for _ in $(seq "$GANGS"); do
    JOBS+=("$(submit "{\"team\":\"b\",\"gpus\":2,\"nodes\":$SIZE,\"pool\":\"od\",\"command\":\"sh $T/job.sh\"}")")
done
wait_for $((GANGS * 60)) "[ \"\$(psql_q \"SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')\")\" = 0 ]" \
    || fail "the gangs never all ended: $(psql_q "SELECT state, count(*) FROM jobs GROUP BY 1")"
for j in "${JOBS[@]}"; do
    n=$(ls "$T" | grep -c "^s\.$j\." || true)
    if [ "$n" != "$SIZE" ]; then
        echo "result job=$j skew_ms=-1"
        continue
    fi
    echo "result job=$j skew_ms=$(cat "$T"/s."$j".* | sort -n | awk 'NR == 1 {a = $1} {b = $1} END {print b - a}')"
done
