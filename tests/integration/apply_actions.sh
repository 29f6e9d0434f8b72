#!/usr/bin/env bash
# tarmac_apply's guards, action by action: the stale-epoch fence, reserve
# recorded once per change, place clears the hold, preempt only touches
# running preemptible work, a cordoned node takes no job, a waiting job's
# reason and its decision are written once per change (after the plan's
# other ops, in the plan's order), and an unknown action aborts the whole
# plan.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_apply)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
psql_q "UPDATE leader SET epoch = 5"
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms) VALUES
        ('od', 't1', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 1, 0),
        ('od', 't2', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 1, 0)"
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, submitted_ms) VALUES ('a', 8, 1000, 0)"           # 1
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, preemptible, submitted_ms) VALUES ('b', 2, 1000, true, 0)"  # 2
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, submitted_ms) VALUES ('c', 2, 1000, 0)"           # 3
apply() { psql_q "SELECT tarmac_apply($1, 100, '$2'::jsonb)"; }

apply 4 '{"actions":[]}' 2>"$WORK/err" && fail "a stale epoch was accepted"
grep -q 'stale' "$WORK/err" || fail "fence message: $(cat "$WORK/err")"

apply 5 '{"actions":[{"op":"reserve","job":1,"node":1,"start_ms":5000,"reason":"r"}]}' >/dev/null
apply 5 '{"actions":[{"op":"reserve","job":1,"node":1,"start_ms":9000,"reason":"r"}]}' >/dev/null
[ "$(psql_q "SELECT hold_node_id || ':' || hold_start_ms FROM jobs WHERE id = 1")" = "1:5000" ] \
    || fail "reserve: $(psql_q 'SELECT hold_node_id, hold_start_ms FROM jobs WHERE id = 1')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'reserve'")" = 1 ] || fail "reserve decided twice"

apply 5 '{"actions":[{"op":"place","job":2,"reason":"loan","allocs":[{"node":1,"gpu_mask":3,"gpu_milli":1000,"cpu_milli":0,"memory_mib":0,"loaned":true}]},
                     {"op":"place","job":3,"reason":"p","allocs":[{"node":2,"gpu_mask":3,"gpu_milli":1000,"cpu_milli":0,"memory_mib":0}]}]}' >/dev/null
[ "$(psql_q "SELECT loaned FROM job_allocations WHERE job_id = 2")" = t ] || fail "loan not recorded"
apply 5 '{"actions":[{"op":"preempt","job":3,"reason":"x"},{"op":"preempt","job":2,"reason":"returned to job 1"}]}' >/dev/null
[ "$(psql_q "SELECT state FROM jobs WHERE id = 3")" = running ] || fail "non-preemptible work was evicted"
[ "$(psql_q "SELECT state || ':' || state_reason FROM jobs WHERE id = 2")" = "queued:returned to job 1" ] \
    || fail "preempt: $(psql_q 'SELECT state, state_reason FROM jobs WHERE id = 2')"
[ "$(psql_q "SELECT count(*) FROM job_allocations WHERE job_id = 2")" = 0 ] || fail "allocation kept"

apply 5 '{"actions":[{"op":"place","job":1,"reason":"p","allocs":[{"node":1,"gpu_mask":255,"gpu_milli":1000,"cpu_milli":0,"memory_mib":0}]}]}' >/dev/null
[ "$(psql_q "SELECT state || ':' || coalesce(hold_node_id::text, 'none') FROM jobs WHERE id = 1")" = "running:none" ] \
    || fail "place did not clear the hold"

psql_q "UPDATE nodes SET cordoned = true WHERE id = 2"
apply 5 '{"actions":[{"op":"place","job":2,"reason":"p","allocs":[{"node":2,"gpu_mask":12,"gpu_milli":1000,"cpu_milli":0,"memory_mib":0}]}]}' >/dev/null
[ "$(psql_q "SELECT state FROM jobs WHERE id = 2")" = queued ] || fail "a job was placed on a cordoned node"

kept() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1])["kept"], separators=(",", ":")))' "$1"; }
# A release the guards refuse (a job on the node) is named in "kept", so the
# controller leaves the instance alone; an empty node is released, and one
# already terminating is not "kept" (its terminate call may go again).
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms)
        VALUES ('od', 't3', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'on_demand', 'ready', 1, 0)"
res=$(apply 5 '{"actions":[{"op":"terminate","node":1,"reason":"idle"},{"op":"terminate","node":3,"reason":"idle"}]}')
[ "$(kept "$res")" = "[1]" ] || fail "kept: $res"
[ "$(psql_q "SELECT state FROM nodes WHERE id = 1")" = ready ] || fail "a node with a job was released"
[ "$(psql_q "SELECT state FROM nodes WHERE id = 3")" = terminating ] || fail "an empty node was kept"
res=$(apply 5 '{"actions":[{"op":"terminate","node":3,"reason":"idle"}]}')
[ "$(kept "$res")" = "[]" ] || fail "a terminating node kept: $res"
[ "$(kept "$(apply 5 '{"actions":[]}')")" = "[]" ] || fail "kept without terminates"

# Budget notes: a soft warning once per scope and month, a hard refusal at
# most once per scope every 15 minutes (controller time).
warn='{"op":"budget","kind":"budget_warn","scope":"org:acme","reason":"w","inputs":{"period":"2026-11"}}'
refuse='{"op":"budget","kind":"budget_refuse","scope":"org:acme","reason":"r","inputs":{"period":"2026-11"}}'
psql_q "SELECT tarmac_apply(5, 1000, '{\"actions\":[$warn,$refuse]}'::jsonb)" >/dev/null
psql_q "SELECT tarmac_apply(5, 2000, '{\"actions\":[$warn,$refuse]}'::jsonb)" >/dev/null
psql_q "SELECT tarmac_apply(5, 1000000, '{\"actions\":[$warn,$refuse]}'::jsonb)" >/dev/null
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'budget_warn'")" = 1 ] || fail "soft warning repeated"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'budget_refuse'")" = 2 ] || fail "refusals not rate-limited to one per 15 min"

# Waits: a queued job's reason and one decision per change; a job no
# longer queued (3 runs) is left alone and counted skipped; the job's wait
# comes after its reservation in the same plan, as in the plan.
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, submitted_ms) VALUES ('d', 8, 1000, 0)"           # 4
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, submitted_ms) VALUES ('e', 8, 1000, 0)"           # 5
w4='{"op":"wait","job":4,"reason":"no_fit: w1","inputs":{"policy":"fifo"}}'
w5='{"op":"wait","job":5,"reason":"no_fit: w5"}'
res=$(apply 5 "{\"actions\":[{\"op\":\"reserve\",\"job\":4,\"node\":3,\"start_ms\":7000,\"reason\":\"r4\"},
                        $w5, $w4, {\"op\":\"wait\",\"job\":3,\"reason\":\"no_fit: w3\"}]}")
[ "$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["applied"], r["skipped"])' "$res")" = "3 1" ] \
    || fail "waits counted: $res"
[ "$(psql_q "SELECT string_agg(state_reason, ',' ORDER BY id) FROM jobs WHERE id IN (3, 4, 5)")" = ",no_fit: w1,no_fit: w5" ] \
    || fail "wait reasons: $(psql_q "SELECT id, state_reason FROM jobs WHERE id IN (3, 4, 5)")"
[ "$(psql_q "SELECT string_agg(kind || ':' || subject_id || ':' || reason || ':' || inputs::text, ' ' ORDER BY id)
             FROM decisions WHERE subject_kind = 'job' AND subject_id IN ('4', '5')")" \
  = 'reserve:4:r4:{} wait:5:no_fit: w5:{} wait:4:no_fit: w1:{"policy": "fifo"}' ] \
    || fail "wait decisions: $(psql_q "SELECT id, kind, subject_id, reason, inputs FROM decisions WHERE subject_id IN ('4', '5')")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'wait' AND subject_id = '3'")" = 0 ] || fail "a running job's wait was decided"
res=$(apply 5 "{\"actions\":[$w4, $w5]}")
[ "$(python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["applied"], r["skipped"])' "$res")" = "0 2" ] \
    || fail "an unchanged wait was written again: $res"
apply 5 '{"actions":[{"op":"wait","job":4,"reason":"no_fit: w2"}]}' >/dev/null
[ "$(psql_q "SELECT string_agg(reason, ',' ORDER BY id) FROM decisions WHERE kind = 'wait' AND subject_id = '4'")" \
  = "no_fit: w1,no_fit: w2" ] || fail "a changed reason was not decided once"
[ "$(psql_q "SELECT state_reason FROM jobs WHERE id = 4")" = "no_fit: w2" ] || fail "a changed reason was not kept"
apply 4 '{"actions":[{"op":"wait","job":5,"reason":"no_fit: stale"}]}' 2>/dev/null && fail "a stale plan of waits was accepted"
[ "$(psql_q "SELECT state_reason FROM jobs WHERE id = 5")" = "no_fit: w5" ] || fail "a stale plan wrote a wait"

before=$(psql_q "SELECT count(*) FROM decisions")
apply 5 '{"actions":[{"op":"wait","job":5,"reason":"no_fit: w6"},{"op":"orphan","instance_id":"i-1","reason":"x"},{"op":"bogus","reason":"x"}]}' 2>/dev/null \
    && fail "an unknown action was accepted"
[ "$(psql_q "SELECT count(*) FROM decisions")" = "$before" ] || fail "a refused plan wrote a decision"
[ "$(psql_q "SELECT state_reason FROM jobs WHERE id = 5")" = "no_fit: w5" ] || fail "a refused plan wrote a wait"
echo "1 passed, 0 failed"
