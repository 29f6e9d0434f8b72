#!/usr/bin/env bash
# kill -9 during gcp launches and terminations, then restart: zero
# duplicate instances, zero orphans, zero lost jobs.
#
# The fake holds each instances.insert 0.25 s before and 0.25 s after it
# creates the instance, so kills land inside launches: before the instance
# exists, and after it exists with its id unrecorded (the next controller
# finds it by its launch-token label, or inserts again with the same name and
# requestId, which GCE answers alreadyExists / with the same operation).
# Idle grace is 1 s, so later kills land among deletes too.
#
#   KILLS=5 (the suite)   KILLS=50 SEED=7 (the soak; docs/benchmarks.md)
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"

kills=${KILLS:-5}
export TARMAC_SIM_AGENT=1
# Two instances a page: every listing pages (aggregatedList pageToken).
export TARMAC_GCP_PAGE_SIZE=2
gcp_fake_start
gcp_control '{"hold_ms": [250, 250]}' >/dev/null

DB=$(new_db itest_gcp_kill9 2>/dev/null)
write_gcp_config "$WORK/k.yaml" kill9 40 1s 200ms
"$TARMAC" migrate --config "$WORK/k.yaml" >/dev/null 2>&1
"$TARMAC" db submit --config "$WORK/k.yaml" --team a --gpus 8 --runtime 1s --count 2 >/dev/null
"$TARMAC" db submit --config "$WORK/k.yaml" --team b --gpus 8 --runtime 1s --count 2 --preemptible >/dev/null

# The two windows a random kill rarely hits.
for point in after_apply after_launch; do
    rc=0
    TARMAC_CRASH_POINT=$point timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" \
        >>"$WORK/kill.out" 2>>"$WORK/crash.log" || rc=$?
    [ "$rc" = 137 ] || fail "crash point $point was not reached (exit $rc)"
done
RANDOM=${SEED:-42}
for i in $(seq 1 "$kills"); do
    pre=""; [ $((i % 2)) = 0 ] && pre=--preemptible
    "$TARMAC" db submit --config "$WORK/k.yaml" --team c --gpus 8 --runtime 1s $pre >/dev/null
    "$TARMAC" serve --config "$WORK/k.yaml" >>"$WORK/kill.out" 2>>"$WORK/kill.log" &
    pid=$!; PIDS+=("$pid")
    sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
submitted=$(psql_q 'SELECT count(*) FROM jobs')
echo "killed the controller $kills times (+2 crash points); nodes so far: $(psql_q 'SELECT count(*) FROM nodes')"
gcp_control '{"hold_ms": [0, 0]}' >/dev/null
timeout 90 "$TARMAC" serve --config "$WORK/k.yaml" --exit-when-idle --max-wall 80s \
    >>"$WORK/kill.out" 2>>"$WORK/kill.log" || fail "final serve failed"
[ "$(psql_q 'SELECT count(*) FROM jobs')" = "$submitted" ] || fail "jobs lost"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "unfinished jobs: $(psql_q "SELECT id, state, state_reason FROM jobs WHERE state <> 'succeeded'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] \
    || fail "nodes left live: $(psql_q "SELECT id, state FROM nodes WHERE state <> 'terminated'")"
gcp_check_cloud kill9 idle
# Every token ever issued an instance at most once, over the whole run
# (the fake's creations = distinct node rows that got an instance).
created=$(curl -s "$GCP_BASE/__fake/state" | python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["instances_created"])')
launched=$(psql_q "SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL")
[ "$created" = "$launched" ] || fail "the fake created $created instances for $launched launched nodes"
cat "$WORK"/kill.log "$WORK"/crash.log >"$WORK/all-kill.txt"
inside=0
for n in $(sed -n 's/.*msg="gcp launch" .* node=\([0-9]*\) .*/\1/p' "$WORK/all-kill.txt" | sort -u); do
    grep -q "msg=\"instance launched\" node=$n " "$WORK/all-kill.txt" || inside=$((inside + 1))
done
found=$(grep -c 'gcp launch found by token' "$WORK/all-kill.txt" || true)
echo "kill -9: $kills random kills + 2 crash points, $submitted jobs, $launched instances, 0 duplicates, 0 orphans, 0 jobs lost; launches cut by a kill: $inside, adopted by token: $found"
gcp_no_secrets
gcp_no_violations
echo "1 passed, 0 failed"
