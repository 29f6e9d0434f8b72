#!/usr/bin/env bash
# bench/gang_stop_scenario.sh GANGS SIZE: how far apart a gang's members
# get their stop signal (run by bench/run-gang-stop.sh, which sets the test
# environment).  The local provider, real agents (heartbeat period
# $HEARTBEAT), SIZE ready nodes; GANGS checkpointable jobs of SIZE nodes,
# one at a time.  Each member writes the time it got SIGTERM (the agents'
# checkpoint signal) and exits.  Once every member of a gang runs, the
# agents' heartbeats are spread evenly over the period (the gang's start
# put them in step: each member asks at the common start; on a cloud they
# drift apart), then the job is cancelled.  Prints one line per gang:
#   result job=ID skew_ms=N
# skew_ms: from the first rank's signal to the last's (-1: a rank never
# got one).
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
e2e_start "bench_gang_stop" >/dev/null
T=$WORK/b
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
cat >"$T/job.sh" <<SH
j=\$TARMAC_JOB_ID r=\$TARMAC_NODE_RANK
trap 'date +%s%3N >"$T/g.\$j.\$r"; exit 0' TERM
touch "$T/s.\$j.\$r"
while :; do sleep 1 & wait \$!; done
SH
wait_for 120 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready' AND last_heartbeat_ms IS NOT NULL\")\" = $SIZE ]" \
    || fail "$SIZE nodes never ready"
HB_MS=$(python3 -c 'import sys; v = sys.argv[1]; print(int(float(v[:-2]) if v.endswith("ms") else float(v.rstrip("s")) * 1000))' "${HEARTBEAT:-10s}")
AGENTS=()
for n in $(psql_q "SELECT id FROM nodes WHERE state = 'ready' ORDER BY id"); do AGENTS+=("$(agent_pid "$n")"); done
for _ in $(seq "$GANGS"); do
    j=$(submit "{\"team\":\"b\",\"gpus\":2,\"nodes\":$SIZE,\"pool\":\"od\",\"checkpointable\":true,\"command\":\"sh $T/job.sh\"}")
    wait_for 120 "[ \"\$(ls $T | grep -c \"^s\.$j\.\")\" = $SIZE ]" || fail "gang $j never started whole"
    # Stopped for a whole period first, so that every agent's heartbeat
    # is due when it is let go and its next one falls where it was let go.
    kill -STOP "${AGENTS[@]}"
    sleep "$(python3 -c "print($HB_MS / 1000)")"
    for a in "${AGENTS[@]}"; do
        kill -CONT "$a"
        sleep "$(python3 -c "print($HB_MS / $SIZE / 1000)")"
    done
    api POST "/v1/jobs/$j/cancel" '{}' >/dev/null
    wait_for $((HB_MS / 1000 * 3 + 10)) "[ \"\$(ls $T | grep -c \"^g\.$j\.\")\" = $SIZE ]" || true
    n=$(ls "$T" | grep -c "^g\.$j\." || true)
    if [ "$n" != "$SIZE" ]; then
        echo "result job=$j skew_ms=-1"
        continue
    fi
    echo "result job=$j skew_ms=$(cat "$T"/g."$j".* | sort -n | awk 'NR == 1 {a = $1} {b = $1} END {print b - a}')"
    wait_for 60 "[ \"\$(psql_q \"SELECT count(*) FROM job_allocations\")\" = 0 ]" || fail "gang $j never left its nodes"
done
