#!/usr/bin/env bash
# tarmac_apply's node agent ops (migrations/0010_agent.sql) on a real
# PostgreSQL: node_unreachable once, unreachable_requeue guarded on the
# node still silent, gpu_idle once per attempt, idle_requeue, idle_cancel,
# and tarmac_prune_samples in batches.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_agent_apply)
write_config "$WORK/c.yaml" 0
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
psql_q "INSERT INTO pools (name, provider, provider_kind, region, zones, instance_types, gpu_model,
          gpus_per_node, capacity_type, min_nodes, max_nodes, idle_grace_ms, updated_ms)
        VALUES ('od','sim','sim','r1','{z1}','{sim.8x}','A100',8,'on_demand',0,1,0,0) ON CONFLICT DO NOTHING;
        INSERT INTO nodes (id, pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
          cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms, ready_ms)
        VALUES (1,'od','t1','i-1','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2),
               (2,'od','t2','i-2','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2);
        UPDATE nodes SET last_heartbeat_ms = 50 WHERE id = 2;
        INSERT INTO jobs (id, team, gpus, gpu_milli, state, attempts, node_id, submitted_ms, started_ms)
        VALUES (1,'t',1,1000,'running',1,1,1,5), (2,'t',1,1000,'running',1,1,1,5),
               (3,'t',1,1000,'running',1,1,1,5), (4,'t',1,1000,'running',1,1,1,5),
               (5,'t',1,1000,'running',1,2,1,5);
        INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib)
        VALUES (1,1,1,1000,0,0), (2,1,2,1000,0,0), (3,1,4,1000,0,0), (4,1,8,1000,0,0), (5,2,1,1000,0,0);
        UPDATE leader SET epoch = 1" >/dev/null
plan='{"actions":[
 {"op":"node_unreachable","node":1,"last_heartbeat_ms":0,"reason":"silent","inputs":{}},
 {"op":"unreachable_requeue","job":1,"node":1,"started_ms":5,"last_heartbeat_ms":0,"reason":"silent","inputs":{}},
 {"op":"unreachable_requeue","job":5,"node":2,"started_ms":5,"last_heartbeat_ms":0,"reason":"silent","inputs":{}},
 {"op":"gpu_idle","job":2,"attempt":1,"reason":"idle","inputs":{"gpus":1}},
 {"op":"idle_requeue","job":3,"node":1,"started_ms":5,"reason":"idle","inputs":{}},
 {"op":"idle_cancel","job":4,"node":1,"started_ms":5,"reason":"idle","inputs":{}}]}'
R=$(psql_q "SELECT tarmac_apply(1, 100, '$plan'::jsonb) ->> 'applied'")
[ "$R" = 5 ] || fail "applied $R of 6 (job 5's node heard from its agent since: skipped)"
R=$(psql_q "SELECT tarmac_apply(1, 200, '$plan'::jsonb) ->> 'applied'")
[ "$R" = 0 ] || fail "a replayed plan applied $R ops"
[ "$(psql_q "SELECT string_agg(id || ':' || state, ' ' ORDER BY id) FROM jobs")" = \
  "1:queued 2:running 3:queued 4:cancelled 5:running" ] || fail "jobs: $(psql_q "SELECT id, state FROM jobs")"
[ "$(psql_q "SELECT unreachable_ms FROM nodes WHERE id = 1")" = 100 ] || fail "node 1 not unreachable"
[ "$(psql_q "SELECT string_agg(cause, ' ' ORDER BY job_id) FROM job_interruptions")" = "unreachable idle" ] \
    || fail "interruptions: $(psql_q "SELECT job_id, cause FROM job_interruptions")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'gpu_idle'")" = 1 ] || fail "gpu_idle not once"
# A heartbeat clears unreachable.
psql_q "SELECT tarmac_agent_report(1, 300, '{}'::jsonb)" >/dev/null
[ "$(psql_q "SELECT coalesce(unreachable_ms, 0) FROM nodes WHERE id = 1")" = 0 ] || fail "a heartbeat left it unreachable"
# Pruning in batches, oldest first.
psql_q "INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)
        SELECT 1, 0, g, 1, 1 FROM generate_series(1, 25) g" >/dev/null
[ "$(psql_q "SELECT tarmac_prune_samples(21, 10)")" = 10 ] || fail "first batch"
[ "$(psql_q "SELECT tarmac_prune_samples(21, 10)")" = 10 ] || fail "second batch"
[ "$(psql_q "SELECT tarmac_prune_samples(21, 10)")" = 0 ] || fail "pruned past the cutoff"
[ "$(psql_q "SELECT min(at_ms) FROM gpu_samples")" = 21 ] || fail "the wrong samples went"
echo "1 passed, 0 failed"
