#!/usr/bin/env bash
# A spot substitution end to end in the live controller, on the sim cloud:
# an on-demand node runs only preemptible, checkpointable work when a spot
# pool is added; the planner asks for a spot node to replace it.  The
# controller is killed (-9) right after that request committed and before
# any cloud call; the next controller launches the spot node with the same
# token, and once it is ready checkpoints the on-demand node's jobs (their
# progress kept, nothing lost), releases that node, and the jobs finish on
# the spot node.  Every step is in decisions.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_substitute)
# write_config's two pools, and one with the on-demand pool only.
write_config "$WORK/both.yaml" 2 2s 1s 300ms
awk '/^  - name: spot$/ {exit} {print}' "$WORK/both.yaml" >"$WORK/od.yaml"
grep -q 'name: spot' "$WORK/od.yaml" && fail "od.yaml still has the spot pool"
"$TARMAC" migrate --config "$WORK/od.yaml" >/dev/null || fail "migrate"

# Two preemptible, checkpointable 2-GPU jobs that run 30 s (estimated 10
# minutes: long enough for spot to pay for the move).
psql_q "INSERT INTO jobs (team, name, gpus, gpu_milli, preemptible, checkpointable, sim_runtime_ms,
                          runtime_estimate_ms, submitted_ms)
        SELECT 'a', 'ckpt', 2, 1000, true, true, 30000, 600000,
               (extract(epoch FROM clock_timestamp()) * 1000)::bigint + g FROM generate_series(1, 2) g"

# 1. Only on-demand: the jobs run on one on-demand node.
"$TARMAC" serve --config "$WORK/od.yaml" >"$WORK/serve1.out" 2>"$WORK/serve1.log" &
SERVE=$!
PIDS+=("$SERVE")
wait_for 30 "[ \"\$(psql_q \"SELECT count(*) FROM jobs WHERE state = 'running'\")\" = 2 ]" \
    || fail "the jobs never ran on on-demand"
sleep 2 # some progress to keep
kill -TERM "$SERVE"
wait "$SERVE" || true
old=$(psql_q "SELECT DISTINCT node_id FROM jobs")
[ "$(psql_q "SELECT capacity_type FROM nodes WHERE id = $old")" = on_demand ] || fail "node $old is not on-demand"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'substitute'")" = 0 ] || fail "substituted without a spot pool"

# 2. The spot pool is added.  The first pass asks for a substitute; the
# controller dies right after that commit, before calling the cloud.
rc=0
TARMAC_CRASH_POINT=after_apply timeout 60 "$TARMAC" serve --config "$WORK/both.yaml" \
    >"$WORK/serve2.out" 2>"$WORK/crash.log" || rc=$?
[ "$rc" = 137 ] || fail "crash point after_apply was not reached (exit $rc)"
new=$(psql_q "SELECT id FROM nodes WHERE replaces_node_id = $old")
[ -n "$new" ] || fail "no node row replaces node $old: $(psql_q 'SELECT id, pool, state, replaces_node_id FROM nodes')"
[ "$(psql_q "SELECT pool || ':' || capacity_type || ':' || state FROM nodes WHERE id = $new")" = "spot:spot:requested" ] \
    || fail "substitute row: $(psql_q "SELECT pool, capacity_type, state FROM nodes WHERE id = $new")"
token=$(psql_q "SELECT launch_token FROM nodes WHERE id = $new")
[ "$(psql_q "SELECT count(*) FROM simcloud.instances WHERE token = '$token'")" = 0 ] \
    || fail "the cloud was called before the crash point"
[ "$(psql_q "SELECT (inputs ->> 'by_node') || ':' || (inputs ->> 'disruption') FROM decisions WHERE kind = 'substitute' AND subject_id = '$old'")" = "$new:substitute" ] \
    || fail "substitute decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'substitute'")"
# Nothing moved yet: the old node keeps its jobs until the spot node is ready.
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'running' AND node_id = $old")" = 2 ] || fail "jobs left early"

# 3. The next controller repairs and carries on.
timeout 120 "$TARMAC" serve --config "$WORK/both.yaml" --exit-when-idle --max-wall 110s \
    >"$WORK/serve3.out" 2>"$WORK/serve3.log" || fail "final serve failed"

[ "$(psql_q "SELECT count(*) FROM simcloud.instances WHERE token = '$token'")" = 1 ] \
    || fail "substitute launched other than once"
[ "$(psql_q "SELECT ready_ms IS NOT NULL FROM nodes WHERE id = $new")" = t ] || fail "substitute never ready"
[ "$(psql_q "SELECT state FROM nodes WHERE id = $old")" = terminated ] || fail "old node not released"
# Moved once the substitute was ready, not before, then released.
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'move' AND subject_id = '$old'
             AND (inputs ->> 'substitute_node')::bigint = $new AND (inputs ->> 'checkpointing')::int = 2
             AND at_ms >= (SELECT ready_ms FROM nodes WHERE id = $new)")" = 1 ] \
    || fail "move decision: $(psql_q "SELECT at_ms, inputs FROM decisions WHERE kind = 'move'")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'terminate' AND subject_id = '$old'")" = 1 ] \
    || fail "no terminate decision for node $old"
# Each job checkpointed off the old node with its progress kept, nothing
# lost, and finished on the spot node in its second attempt.
bad=$(psql_q "SELECT count(*) FROM jobs j WHERE state <> 'succeeded' OR attempts <> 2 OR lost_gpu_ms <> 0
              OR progress_ms < 2000 OR node_id <> $new
              OR NOT EXISTS (SELECT 1 FROM job_interruptions i WHERE i.job_id = j.id AND i.node_id = $old
                               AND i.cause = 'checkpoint' AND i.kept_ms = i.ran_ms AND i.lost_gpu_ms = 0)")
[ "$bad" = 0 ] || fail "$bad jobs not moved as they should: $(psql_q 'SELECT id, state, attempts, progress_ms, lost_gpu_ms, node_id FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'checkpoint' AND inputs ->> 'moved_by' = 'planner'")" = 2 ] \
    || fail "checkpoint decisions: $(psql_q "SELECT subject_id, inputs FROM decisions WHERE kind = 'checkpoint'")"
# The runtime adds up across the two attempts (plus a few ticks).
bad=$(psql_q "SELECT count(*) FROM jobs WHERE progress_ms + finished_ms - started_ms < sim_runtime_ms
                                          OR progress_ms + finished_ms - started_ms > sim_runtime_ms + 5000")
[ "$bad" = 0 ] || fail "resumed runtime: $(psql_q 'SELECT id, progress_ms, finished_ms - started_ms FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'substitute'")" = 1 ] || fail "substituted more than once"
# The work moved to spot: no on-demand node was launched for it.
[ "$(psql_q "SELECT count(*) FROM nodes WHERE capacity_type = 'on_demand'")" = 1 ] \
    || fail "on-demand nodes launched: $(psql_q "SELECT id, state_reason FROM nodes WHERE capacity_type = 'on_demand'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state NOT IN ('terminated', 'interrupted')")" = 0 ] || fail "nodes left live"
echo "node $old (on-demand) replaced by spot node $new across a kill -9; jobs moved with" \
     "$(psql_q 'SELECT sum(progress_ms) / 1000 FROM jobs') s of progress kept"
echo "1 passed, 0 failed"
