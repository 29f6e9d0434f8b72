#!/usr/bin/env bash
# kill -9 the controller at random points while it launches nodes, restart
# it each time, then let it finish: no job lost, no node launched twice, no
# instance left that the database does not know.
#
#   KILLS=50 tests/integration/kill9.sh    # more kill points (default 16)
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

kills=${KILLS:-16}
DB=$(new_db itest_kill9)
write_config "$WORK/c.yaml" 6 1s 1s 200ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3s --count 10 >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 2 --runtime 2s --count 12 --preemptible >/dev/null
submitted=$(psql_q 'SELECT count(*) FROM jobs')

# First die exactly in the two windows a random kill rarely hits: after the
# node rows and tokens committed but before any cloud call, and after the
# cloud made an instance but before its id was recorded.
for point in after_apply after_launch after_launch; do
    rc=0
    TARMAC_CRASH_POINT=$point timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" \
        >>"$WORK/serve.out" 2>>"$WORK/crash.log" || rc=$?
    [ "$rc" = 137 ] || fail "crash point $point was not reached (exit $rc)"
done
grep -q 'point=after_launch' "$WORK/crash.log" || fail "no after_launch crash"
orphaned=$(psql_q "SELECT count(*) FROM nodes n JOIN simcloud.instances i ON i.token = n.launch_token WHERE n.instance_id IS NULL")
echo "instances launched but not recorded when the controller died: $orphaned"
[ "$orphaned" -ge 1 ] || fail "the after_launch crash left no unrecorded instance to adopt"

# Then kill it at random points.
RANDOM=${SEED:-42}
for i in $(seq 1 "$kills"); do
    "$TARMAC" serve --config "$WORK/c.yaml" >>"$WORK/serve.out" 2>>"$WORK/serve.log" &
    pid=$!; PIDS+=("$pid")
    # Kill anywhere from the first tick to a few ticks in.
    sleep "0.$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
    sleep $(( RANDOM % 2 ))
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
echo "killed the controller $kills times; nodes so far: $(psql_q 'SELECT count(*) FROM nodes')"



timeout 120 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 110s \
    >>"$WORK/serve.out" 2>>"$WORK/serve.log" || fail "final serve failed"

[ "$(psql_q 'SELECT count(*) FROM jobs')" = "$submitted" ] || fail "jobs lost"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "unfinished jobs: $(psql_q "SELECT id, state, state_reason FROM jobs WHERE state <> 'succeeded'")"
dup=$(psql_q "SELECT count(*) FROM (SELECT node_id FROM simcloud.instances GROUP BY node_id HAVING count(*) > 1) d")
[ "$dup" = 0 ] || fail "$dup node rows have more than one instance"
unknown=$(psql_q "SELECT count(*) FROM simcloud.instances i WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.launch_token = i.token)")
[ "$unknown" = 0 ] || fail "$unknown instances the database does not know"
alive=$(psql_q "SELECT count(*) FROM simcloud.instances WHERE terminate_requested_ms IS NULL")
[ "$alive" = 0 ] || fail "$alive instances left running"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] || fail "nodes left live"
echo "instances: $(psql_q 'SELECT count(*) FROM simcloud.instances'), found by token: $(psql_q "SELECT count(*) FROM decisions WHERE kind = 'adopt' OR (kind = 'ready' AND inputs ? 'zone')")"
echo "1 passed, 0 failed"
