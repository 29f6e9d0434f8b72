#!/usr/bin/env bash
# tarmac_rendezvous (migrations/0020_rendezvous.sql) on a real PostgreSQL:
# ranks in node id order with the same list for every member, GPUs per
# node, the master port picked from the range on rank 0's node and kept for
# the attempt, never one port to two jobs on one node, a full range (and a
# member without an address) making the job wait with its reason recorded
# once as a decision, a port freed when its job ends or moves on to its
# next attempt, and a single node without an address served on loopback.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_rendezvous_ports)
write_config "$WORK/c.yaml" 0
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
psql_q "INSERT INTO pools (name, provider, provider_kind, region, zones, instance_types, gpu_model,
          gpus_per_node, capacity_type, min_nodes, max_nodes, idle_grace_ms, updated_ms)
        VALUES ('od','sim','sim','r1','{z1}','{sim.8x}','A100',8,'on_demand',0,5,0,0) ON CONFLICT DO NOTHING;
        INSERT INTO nodes (id, pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
          cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms,
          ready_ms, address)
        VALUES (1,'od','t1','i-1','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2,'10.0.0.1'),
               (2,'od','t2','i-2','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2,'10.0.0.2'),
               (3,'od','t3','i-3','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2,'fd00::3'),
               (4,'od','t4','i-4','z1','sim.8x',8,'A100',1,1,'on_demand','ready',1,1,1,2,NULL);
        INSERT INTO jobs (id, team, gpus, gpu_milli, state, attempts, node_id, submitted_ms, started_ms)
        VALUES (1,'t',2,1000,'running',1,1,1,5), (2,'t',1,1000,'running',1,1,1,5),
               (3,'t',1,1000,'running',1,1,1,5), (4,'t',1,1000,'running',1,2,1,5),
               (5,'t',1,1000,'running',1,1,1,5), (6,'t',1,1000,'running',1,4,1,5);
        -- job 1: three nodes, allocated out of id order; job 5: a member without an address
        INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib)
        VALUES (1,3,3,1000,0,0), (1,1,3,1000,0,0), (1,2,3,1000,0,0),
               (2,1,4,1000,0,0), (2,2,4,1000,0,0), (3,1,8,1000,0,0), (4,2,8,1000,0,0),
               (5,1,16,1000,0,0), (5,4,1,1000,0,0), (6,4,2,1000,0,0)" >/dev/null
rdv() { psql_q "SELECT tarmac_rendezvous($1, $2, $3, 100, 29500, 29501)::jsonb"; }
field() { psql_q "SELECT ('$1'::jsonb) #>> '{$2}'"; }

# Ranks by node id, the same list for each member, the port kept.
for n in 1 2 3; do
    R=$(rdv 1 1 "$n")
    [ "$(field "$R" rank)" = $((n - 1)) ] || fail "job 1 on node $n: rank $(field "$R" rank): $R"
    [ "$(field "$R" nodes)" = 3 ] || fail "job 1: nodes: $R"
    [ "$(field "$R" gpus_per_node)" = 2 ] || fail "job 1: gpus_per_node: $R"
    [ "$(psql_q "SELECT ('$R'::jsonb -> 'addrs')::text")" = '["10.0.0.1", "10.0.0.2", "fd00::3"]' ] \
        || fail "job 1: addrs in rank order: $R"
    [ "$(field "$R" master_port)" = 29500 ] || fail "job 1 on node $n: master_port: $R"
done
# A second job whose rank 0 is node 1 gets the other port; the range is then full there.
[ "$(field "$(rdv 2 1 2)" master_port)" = 29501 ] || fail "job 2 should get 29501: $(rdv 2 1 2)"
R=$(rdv 3 1 1)
[ "$(field "$R" master_port)" = "" ] || fail "job 3 got a port from a full range: $R"
field "$R" wait | grep -q "no free rendezvous port on node 1" || fail "job 3's wait: $R"
rdv 3 1 1 >/dev/null
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'rendezvous_wait' AND subject_id = '3'")" = 1 ] \
    || fail "the wait of job 3 should be recorded once: $(psql_q "SELECT kind, subject_id, reason FROM decisions")"
psql_q "SELECT reason FROM decisions WHERE kind = 'rendezvous_wait' AND subject_id = '3'" \
    | grep -q "agent.rendezvous_ports 29500-29501" || fail "the decision does not name the range"
# Another node's jobs have the whole range to themselves.
[ "$(field "$(rdv 4 1 2)" master_port)" = 29500 ] || fail "job 4 on node 2 should get 29500: $(rdv 4 1 2)"
[ "$(psql_q "SELECT count(*) FROM (SELECT node_id, port FROM rendezvous_ports GROUP BY 1, 2 HAVING count(*) > 1) d")" = 0 ] \
    || fail "a port given twice on one node"
# Job 2 ends: its port goes to job 3.
psql_q "UPDATE jobs SET state = 'succeeded' WHERE id = 2" >/dev/null
[ "$(field "$(rdv 3 1 1)" master_port)" = 29501 ] || fail "job 3 should get 29501 once job 2 ended: $(rdv 3 1 1)"
# Job 1's next attempt: its old port is given up and one picked afresh.
psql_q "UPDATE jobs SET attempts = 2 WHERE id = 1" >/dev/null
[ "$(field "$(rdv 1 2 2)" master_port)" = 29500 ] || fail "job 1's attempt 2: $(rdv 1 2 2)"
[ "$(psql_q "SELECT count(*) FROM rendezvous_ports WHERE job_id = 1")" = 1 ] || fail "job 1 holds two ports"
# A member without an address: the job waits, saying which node.
R=$(rdv 5 1 1)
[ "$(field "$R" master_port)" = "" ] && field "$R" wait | grep -q "node 4 has not reported its address" \
    || fail "job 5 should wait for node 4's address: $R"
# One node without an address talks to itself on loopback.
R=$(rdv 6 1 4)
[ "$(field "$R" rank)/$(field "$R" nodes)/$(field "$R" addrs,0)" = "0/1/127.0.0.1" ] && [ -n "$(field "$R" master_port)" ] \
    || fail "job 6 (one node, no address): $R"
echo "1 passed, 0 failed"
