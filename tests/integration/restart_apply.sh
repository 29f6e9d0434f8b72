#!/usr/bin/env bash
# tarmac_apply's "restart" op (migrations/0015_restart.sql) against the real
# database: the node is cordoned, its checkpointable job checkpoints (progress
# kept), the one that cannot is requeued to start over (cause 'consolidate',
# its attempt's GPU time lost, attempt + 1 at its next placement), the node
# decision carries both sums and counts as a disruption; nothing leaves a
# node cordoned meanwhile; a plan replayed after a crash changes nothing;
# the other ops still apply through the wrapper, and the epoch fence holds.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_restart_apply)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
psql_q "UPDATE leader SET epoch = 5"
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms) VALUES
        ('od', 't1', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 32770000, 0, 0),
        ('od', 't2', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 32770000, 0, 0)"
# 1: checkpointable, 2: cannot checkpoint, both on node 1 since 1000.
# 3: cannot checkpoint, on node 2 since 1000.
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, preemptible, checkpointable, state, node_id, started_ms,
                          attempts, submitted_ms) VALUES
        ('a', 2, 1000, true, true, 'running', 1, 1000, 1, 0),
        ('a', 1, 1000, true, false, 'running', 1, 1000, 2, 0),
        ('a', 1, 1000, true, false, 'running', 2, 1000, 1, 0)"
psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib) VALUES
        (1, 1, 3, 1000, 0, 0), (2, 1, 4, 1000, 0, 0), (3, 2, 1, 1000, 0, 0)"
apply() { psql_q "SELECT tarmac_apply($1, $2, '$3'::jsonb)"; }

restart='{"op":"restart","node":1,"reason":"planner: consolidate by restart",
          "inputs":{"pool":"od","disruption":"restart","saving_usd":128,"redone_usd":4,"redone_gpu_hours":1},
          "jobs":[{"job":1,"started_ms":1000,"cause":"checkpoint","reason":"ckpt","inputs":{"restart":"checkpoint"}},
                  {"job":2,"started_ms":1000,"cause":"consolidate","reason":"start over","inputs":{"restart":"from_start"}}]}'

apply 4 10000 "{\"actions\":[$restart]}" 2>"$WORK/err" && fail "a stale epoch was accepted"
grep -q 'stale' "$WORK/err" || fail "fence message: $(cat "$WORK/err")"

out=$(apply 5 10000 "{\"actions\":[$restart]}")
echo "$out" | grep -q '"applied": 1' || fail "restart: $out"
[ "$(psql_q "SELECT state || ':' || cordoned FROM nodes WHERE id = 1")" = "draining:true" ] \
    || fail "cordon: $(psql_q 'SELECT id, state, cordoned FROM nodes')"
[ "$(psql_q "SELECT string_agg(id || ':' || state || ':' || progress_ms || ':' || lost_gpu_ms || ':' || attempts, ',' ORDER BY id) FROM jobs WHERE id IN (1, 2)")" = "1:queued:9000:0:1,2:queued:0:9000:2" ] \
    || fail "jobs: $(psql_q 'SELECT id, state, progress_ms, lost_gpu_ms, attempts FROM jobs')"
[ "$(psql_q "SELECT string_agg(job_id || ':' || cause || ':' || kept_ms || ':' || lost_gpu_ms, ',' ORDER BY job_id) FROM job_interruptions")" = "1:checkpoint:9000:0,2:consolidate:0:9000" ] \
    || fail "interruptions: $(psql_q 'SELECT * FROM job_interruptions')"
[ "$(psql_q "SELECT string_agg(kind, ',' ORDER BY id) FROM decisions")" = "consolidate_restart,checkpoint,requeue" ] \
    || fail "decisions: $(psql_q 'SELECT kind, subject_id FROM decisions ORDER BY id')"
[ "$(psql_q "SELECT (inputs ->> 'saving_usd') || ':' || (inputs ->> 'redone_usd') || ':' || (inputs ->> 'disruption') FROM decisions WHERE kind = 'consolidate_restart'")" = "128:4:restart" ] \
    || fail "restart decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'consolidate_restart'")"
[ "$(psql_q "SELECT (inputs ->> 'cause') || ':' || (inputs ->> 'next_attempt') FROM decisions WHERE kind = 'requeue'")" = "consolidate:3" ] \
    || fail "requeue decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'requeue'")"
[ "$(psql_q "SELECT idle_since_ms FROM nodes WHERE id = 1")" = 10000 ] || fail "node 1 not idle from the restart"

# Replayed after a crash: nothing.
out=$(apply 5 10000 "{\"actions\":[$restart]}")
echo "$out" | grep -q '"applied": 0' || fail "replayed plan applied again: $out"
[ "$(psql_q "SELECT count(*) FROM decisions")" = 3 ] || fail "replay wrote decisions"

# A node cordoned meanwhile by someone else keeps its job; the plan's other
# ops (0002's terminate of the emptied node) still apply.
psql_q "UPDATE nodes SET cordoned = true WHERE id = 2"
out=$(apply 5 11000 '{"actions":[{"op":"restart","node":2,"reason":"r","jobs":[{"job":3,"started_ms":1000,"cause":"consolidate","reason":"x"}]},
                                  {"op":"terminate","node":1,"reason":"drained and empty"}]}')
echo "$out" | grep -q '"applied": 1' || fail "restart of a cordoned node with a terminate: $out"
echo "$out" | grep -q '"skipped": 1' || fail "restart of a cordoned node not skipped: $out"
[ "$(psql_q "SELECT state FROM jobs WHERE id = 3")" = running ] || fail "job 3 left a node cordoned by someone else"
[ "$(psql_q "SELECT state FROM nodes WHERE id = 1")" = terminating ] || fail "terminate not applied through the wrapper"

# consolidate_restart set on the on-demand pool, beside a spot pool of the
# same model that preemptible work goes to: accepted, and said once at start.
DB=$(new_db itest_restart_note)
write_config "$WORK/n.yaml"
sed -i '0,/    idle_grace: 2s/s//    idle_grace: 2s\n    consolidate_restart: false/' "$WORK/n.yaml"
grep -q 'consolidate_restart: false' "$WORK/n.yaml" || fail "config edit"
"$TARMAC" migrate --config "$WORK/n.yaml" >/dev/null
timeout 30 "$TARMAC" serve --config "$WORK/n.yaml" --exit-when-idle --max-wall 5s >"$WORK/n.out" 2>"$WORK/n.log" \
    || fail "serve with consolidate_restart on an on-demand pool failed: $(tail -5 "$WORK/n.log")"
[ "$(grep -c 'consolidate_restart does nothing on this pool' "$WORK/n.log")" = 1 ] \
    || fail "note at start: $(grep -i consolidate "$WORK/n.log")"
grep 'consolidate_restart does nothing' "$WORK/n.log" | grep -q 'pool=od ' || fail "note names the pool: $(grep consolidate "$WORK/n.log")"
echo "1 passed, 0 failed"
