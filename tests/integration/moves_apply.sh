#!/usr/bin/env bash
# tarmac_apply's planner ops (migrations/0007), op by op against the real
# database: drain and move cordon once and a move checkpoints its jobs with
# their progress kept, only if its cordon applied; deadline_od routes a job
# to on-demand and takes it off spot; substitute links the node the same
# plan requested; a refusal repeated each tick is one decision until its
# kind changes or it comes back after a quiet spell.  0006's spot ops and
# 0002's base ops still apply through the new wrapper, and the epoch fence
# holds.  A plan replayed after a crash changes nothing.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_moves_apply)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
psql_q "UPDATE leader SET epoch = 5"
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms) VALUES
        ('od', 't1', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 32770000, 0, 0),
        ('od', 't2', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 32770000, 0, 0),
        ('spot', 't3', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'spot', 'ready', 9830000, 0, 0)"
# 1, 2: checkpointable on node 2 since 1000; 3: plain, on spot node 3 since
# 2000, with a deadline; 4: queued with a deadline.
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, preemptible, checkpointable, state, node_id, started_ms,
                          attempts, submitted_ms, deadline_ms) VALUES
        ('a', 2, 1000, true, true, 'running', 2, 1000, 1, 0, NULL),
        ('a', 2, 1000, true, true, 'running', 2, 1000, 1, 0, NULL),
        ('a', 8, 1000, true, false, 'running', 3, 2000, 1, 0, 50000),
        ('a', 1, 1000, true, false, 'queued', NULL, NULL, 0, 0, 50000)"
psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib) VALUES
        (1, 2, 3, 1000, 0, 0), (2, 2, 12, 1000, 0, 0), (3, 3, 255, 1000, 0, 0)"
apply() { psql_q "SELECT tarmac_apply($1, $2, '$3'::jsonb)"; }

drain='{"op":"drain","node":1,"reason":"planner: oversized","inputs":{"pool":"od"}}'
move='{"op":"move","node":2,"reason":"planner: consolidate","inputs":{"pool":"od","disruption":"move"},
       "jobs":[{"job":1,"started_ms":1000,"reason":"moved","inputs":{"moved_by":"planner"}},
               {"job":2,"started_ms":1000,"reason":"moved","inputs":{"moved_by":"planner"}}]}'

apply 4 10000 "{\"actions\":[$drain,$move]}" 2>"$WORK/err" && fail "a stale epoch was accepted"
grep -q 'stale' "$WORK/err" || fail "fence message: $(cat "$WORK/err")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE cordoned")" = 0 ] || fail "a fenced plan cordoned"

out=$(apply 5 10000 "{\"actions\":[$drain,$move]}")
echo "$out" | grep -q '"applied": 2' || fail "drain and move: $out"
[ "$(psql_q "SELECT string_agg(id || ':' || state || ':' || cordoned, ',' ORDER BY id) FROM nodes WHERE id IN (1, 2)")" = "1:draining:true,2:draining:true" ] \
    || fail "cordons: $(psql_q 'SELECT id, state, cordoned FROM nodes')"
[ "$(psql_q "SELECT string_agg(state || ':' || progress_ms || ':' || lost_gpu_ms, ',' ORDER BY id) FROM jobs WHERE id IN (1, 2)")" = "queued:9000:0,queued:9000:0" ] \
    || fail "moved jobs: $(psql_q 'SELECT id, state, progress_ms, lost_gpu_ms FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM job_interruptions WHERE node_id = 2 AND cause = 'checkpoint' AND kept_ms = 9000")" = 2 ] \
    || fail "interruption rows: $(psql_q 'SELECT * FROM job_interruptions')"
[ "$(psql_q "SELECT string_agg(kind, ',' ORDER BY id) FROM decisions")" = "drain,move,checkpoint,checkpoint" ] \
    || fail "decisions: $(psql_q 'SELECT kind, subject_id FROM decisions ORDER BY id')"
# An idle node stays idle-timed: node 2 is empty from now.
[ "$(psql_q "SELECT idle_since_ms FROM nodes WHERE id = 2")" = 10000 ] || fail "node 2 not idle from the move"

# Replayed after a crash: nothing.
out=$(apply 5 10000 "{\"actions\":[$drain,$move]}")
echo "$out" | grep -q '"applied": 0' || fail "replayed plan applied again: $out"
[ "$(psql_q "SELECT count(*) FROM decisions")" = 4 ] || fail "replay wrote decisions"

# The drained empty node is released through 0002's terminate, which must
# still apply (with 0006's spot ops) through the wrapper.
out=$(apply 5 11000 '{"actions":[{"op":"terminate","node":2,"reason":"drained and empty"},
                                  {"op":"spot_notice","node":3,"notice_ms":10500,"reason":"notice"}]}')
echo "$out" | grep -q '"applied": 2' || fail "base and spot ops: $out"
[ "$(psql_q "SELECT state FROM nodes WHERE id = 2")" = terminating ] || fail "terminate not applied"
psql_q "UPDATE nodes SET cordoned = false, notice_ms = NULL WHERE id = 3"

# A move of a node cordoned meanwhile moves nothing.
psql_q "UPDATE nodes SET state = 'ready', cordoned = true WHERE id = 1"
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, preemptible, checkpointable, state, node_id, started_ms,
                          attempts, submitted_ms) VALUES ('a', 1, 1000, true, true, 'running', 1, 1000, 1, 0)"
psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib) VALUES (5, 1, 1, 1000, 0, 0)"
out=$(apply 5 12000 '{"actions":[{"op":"move","node":1,"reason":"m","jobs":[{"job":5,"started_ms":1000,"reason":"x"}]}]}')
echo "$out" | grep -q '"skipped": 1' || fail "move of a cordoned node: $out"
[ "$(psql_q "SELECT state FROM jobs WHERE id = 5")" = running ] || fail "job 5 moved off a node cordoned by someone else"

# Deadline: job 3 (plain, on spot) is switched and requeued, its attempt
# lost (cause 'deadline'); job 4 (queued) is switched.  Each once.
dl='{"op":"deadline_od","job":3,"node":3,"started_ms":2000,"reason":"runs on on-demand from now: deadline",
     "leave_reason":"deadline: off spot node 3","inputs":{"deadline_ms":50000,"remaining_ms":40000,"boot_ms":1000}}'
dq='{"op":"deadline_od","job":4,"reason":"runs on on-demand from now: deadline","inputs":{"deadline_ms":50000}}'
out=$(apply 5 13000 "{\"actions\":[$dl,$dq]}")
echo "$out" | grep -q '"applied": 2' || fail "deadline_od: $out"
[ "$(psql_q "SELECT string_agg(id || ':' || state || ':' || coalesce(on_demand_from_ms, 0), ',' ORDER BY id) FROM jobs WHERE id IN (3, 4)")" = "3:queued:13000,4:queued:13000" ] \
    || fail "switched jobs: $(psql_q 'SELECT id, state, on_demand_from_ms FROM jobs')"
[ "$(psql_q "SELECT cause || ':' || lost_gpu_ms FROM job_interruptions WHERE job_id = 3")" = "deadline:88000" ] \
    || fail "deadline requeue: $(psql_q 'SELECT * FROM job_interruptions WHERE job_id = 3')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'deadline_on_demand' AND inputs ->> 'remaining_ms' = '40000'")" = 1 ] \
    || fail "deadline decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'deadline_on_demand'")"
out=$(apply 5 13500 "{\"actions\":[$dl,$dq]}")
echo "$out" | grep -q '"applied": 0' || fail "deadline replayed: $out"

# Substitute: linked to the node the same plan requested, after it.
req='{"op":"request_node","pool":"spot","token":"sub-1","zone":"z","instance_type":"sim.8x","gpus":8,
      "gpu_model":"A100","cpu_milli":1000,"memory_mib":1000,"capacity_type":"spot","price_uusd_per_hour":9830000,
      "reason":"substitute for node 6"}'
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms) VALUES
        ('od', 't6', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 32770000, 0)" >/dev/null
old=$(psql_q "SELECT id FROM nodes WHERE launch_token = 't6'")
sub="{\"op\":\"substitute\",\"node\":$old,\"token\":\"sub-1\",\"reason\":\"to be replaced\",\"inputs\":{\"pool\":\"od\",\"disruption\":\"substitute\"}}"
out=$(apply 5 14000 "{\"actions\":[$sub,$req]}")
echo "$out" | grep -q '"applied": 2' || fail "request and substitute: $out"
echo "$out" | grep -q '"token": "sub-1"' || fail "the new node's id is not returned: $out"
[ "$(psql_q "SELECT replaces_node_id FROM nodes WHERE launch_token = 'sub-1'")" = "$old" ] || fail "substitute not linked"

# Refusals: one decision while the same kind repeats each tick; a new one
# when the kind changes, and when it comes back after a quiet spell.
ref() { echo "{\"op\":\"launch_refused\",\"subject\":\"od\",\"key\":\"$1\",\"quiet_ms\":900,\"reason\":\"pool od at its max of ${2:-2} nodes\",\"inputs\":{\"max_nodes\":2}}"; }
for t in 20000 20300 20600 20900 21200; do apply 5 $t "{\"actions\":[$(ref max_nodes $t)]}" >/dev/null; done
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_refused'")" = 1 ] \
    || fail "repeated refusal: $(psql_q "SELECT at_ms, reason FROM decisions WHERE kind = 'launch_refused'")"
apply 5 21500 "{\"actions\":[$(ref no_capacity)]}" >/dev/null
apply 5 21800 "{\"actions\":[$(ref no_capacity)]}" >/dev/null
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_refused'")" = 2 ] || fail "changed refusal not recorded"
apply 5 30000 "{\"actions\":[$(ref no_capacity)]}" >/dev/null
[ "$(psql_q "SELECT string_agg(at_ms || ':' || (inputs ->> 'key'), ',' ORDER BY id) FROM decisions WHERE kind = 'launch_refused'")" = "20000:max_nodes,21500:no_capacity,30000:no_capacity" ] \
    || fail "refusals: $(psql_q "SELECT at_ms, inputs FROM decisions WHERE kind = 'launch_refused'")"

# The disruptions the snapshot counts: the move and the substitution.
[ "$(psql_q "SELECT string_agg(kind || ':' || (inputs ->> 'pool'), ',' ORDER BY id) FROM decisions WHERE inputs ? 'disruption'")" = "move:od,substitute:od" ] \
    || fail "disruptions: $(psql_q "SELECT kind, inputs FROM decisions WHERE inputs ? 'disruption'")"
echo "1 passed, 0 failed"
