#!/usr/bin/env bash
# tarmac_apply's fence op (migrations/0017_fence.sql) on a real PostgreSQL:
# a silent node becomes terminating with its job still allocated (decision
# fence); a node heard from since the plan is not fenced and is named in
# "kept", so the controller makes no cloud call for it; a replayed plan
# changes nothing; the other ops of the plan still apply.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_fence_apply)
write_config "$WORK/c.yaml" 0
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
psql_q "INSERT INTO pools (name, provider, provider_kind, region, zones, instance_types, gpu_model,
          gpus_per_node, capacity_type, min_nodes, max_nodes, idle_grace_ms, updated_ms)
        VALUES ('od','sim','sim','r1','{z1}','{sim.8x}','A100',8,'on_demand',0,1,0,0) ON CONFLICT DO NOTHING;
        INSERT INTO nodes (id, pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
          cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms, ready_ms)
        VALUES (1,'od','t1','i-1','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2),
               (2,'od','t2','i-2','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2);
        UPDATE nodes SET last_heartbeat_ms = 40;
        UPDATE nodes SET last_heartbeat_ms = 50 WHERE id = 2;
        INSERT INTO jobs (id, team, gpus, gpu_milli, state, attempts, node_id, submitted_ms, started_ms)
        VALUES (1,'t',1,1000,'running',1,1,1,5), (2,'t',1,1000,'running',1,2,1,5);
        INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib)
        VALUES (1,1,1,1000,0,0), (2,2,1,1000,0,0);
        UPDATE leader SET epoch = 1" >/dev/null
plan='{"actions":[
 {"op":"fence","node":1,"last_heartbeat_ms":40,"reason":"silent: fenced","inputs":{"instance_id":"i-1"}},
 {"op":"fence","node":2,"last_heartbeat_ms":40,"reason":"silent: fenced","inputs":{"instance_id":"i-2"}},
 {"op":"node_unreachable","node":1,"last_heartbeat_ms":40,"reason":"silent","inputs":{}}]}'
OUT=$(psql_q "SELECT tarmac_apply(1, 100, '$plan'::jsonb)")
[ "$(psql_q "SELECT '$OUT'::jsonb ->> 'applied'")" = 2 ] || fail "want the fence of node 1 and node_unreachable applied: $OUT"
[ "$(psql_q "SELECT '$OUT'::jsonb -> 'kept'")" = "[2]" ] || fail "node 2 (heard from since the plan) should be kept: $OUT"
[ "$(psql_q "SELECT string_agg(id || ':' || state, ' ' ORDER BY id) FROM nodes")" = "1:terminating 2:ready" ] \
    || fail "nodes: $(psql_q "SELECT id, state FROM nodes")"
# Fencing moves no job: they leave once the instance is confirmed gone.
[ "$(psql_q "SELECT string_agg(job_id || '@' || node_id, ' ' ORDER BY job_id) FROM job_allocations")" = "1@1 2@2" ] \
    || fail "allocations: $(psql_q "SELECT job_id, node_id FROM job_allocations")"
[ "$(psql_q "SELECT state FROM jobs WHERE id = 1")" = running ] || fail "job 1 left before its node was confirmed gone"
[ "$(psql_q "SELECT count(*) || ' ' || min(reason) FROM decisions WHERE kind = 'fence' AND subject_id = '1'")" = "1 silent: fenced" ] \
    || fail "fence decision: $(psql_q "SELECT kind, subject_id, reason FROM decisions")"
OUT=$(psql_q "SELECT tarmac_apply(1, 200, '$plan'::jsonb)")
[ "$(psql_q "SELECT '$OUT'::jsonb ->> 'applied'")" = 0 ] || fail "a replayed plan applied: $OUT"
[ "$(psql_q "SELECT '$OUT'::jsonb -> 'kept'")" = "[2]" ] || fail "replayed: $OUT"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'fence'")" = 1 ] || fail "fence recorded twice"
# A stale epoch is refused.
psql_q "SELECT tarmac_apply(0, 300, '$plan'::jsonb)" >/dev/null 2>&1 && fail "a stale epoch was accepted"
echo "1 passed, 0 failed"
