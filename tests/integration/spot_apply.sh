#!/usr/bin/env bash
# tarmac_apply's spot actions (migrations/0006), action by action: a notice
# cordons and is recorded once, a checkpoint keeps the attempt's runtime and
# loses nothing, a requeue loses the attempt's GPU time, each guarded on the
# attempt it was computed for, so a plan applied again after a crash changes
# nothing; the epoch fence holds; a node that goes with jobs no requeue
# named still counts their loss (0002's node_gone path).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_spot_apply)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
psql_q "UPDATE leader SET epoch = 5"
psql_q "INSERT INTO nodes (pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli, memory_mib,
        capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms) VALUES
        ('spot', 't1', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'spot', 'ready', 9830000, 0, 0),
        ('spot', 't2', 'z', 'sim.8x', 8, 'A100', 1000, 1000, 'spot', 'ready', 9830000, 0, 0)"
# 1: checkpointable, 2 GPUs on node 1 since 1000; 2: plain, 1 GPU on node 1
# since 4000 (its second start); 3: plain, 8 GPUs on node 2 since 0.
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, preemptible, checkpointable, state, node_id, started_ms,
                          attempts, submitted_ms) VALUES
        ('a', 2, 1000, true, true, 'running', 1, 1000, 1, 0),
        ('a', 1, 1000, true, false, 'running', 1, 4000, 2, 0),
        ('b', 8, 1000, true, false, 'running', 2, 0, 1, 0)"
psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib) VALUES
        (1, 1, 3, 1000, 0, 0), (2, 1, 4, 1000, 0, 0), (3, 2, 255, 1000, 0, 0)"
apply() { psql_q "SELECT tarmac_apply($1, $2, '$3'::jsonb)"; }

notice='{"op":"spot_notice","node":1,"notice_ms":9000,"reason":"notice","inputs":{"source":"test"}}'
ckpt='{"op":"checkpoint","job":1,"node":1,"started_ms":1000,"reason":"checkpointed","inputs":{}}'

apply 4 10000 "{\"actions\":[$notice,$ckpt]}" 2>"$WORK/err" && fail "a stale epoch was accepted"
grep -q 'stale' "$WORK/err" || fail "fence message: $(cat "$WORK/err")"
[ "$(psql_q "SELECT state FROM jobs WHERE id = 1")" = running ] || fail "a fenced plan changed a job"

out=$(apply 5 10000 "{\"actions\":[$notice,$ckpt]}")
echo "$out" | grep -q '"applied": 2' || fail "notice and checkpoint: $out"
[ "$(psql_q "SELECT cordoned || ':' || notice_ms FROM nodes WHERE id = 1")" = "true:9000" ] \
    || fail "notice not recorded: $(psql_q 'SELECT cordoned, notice_ms FROM nodes WHERE id = 1')"
[ "$(psql_q "SELECT state || ':' || progress_ms || ':' || lost_gpu_ms || ':' || attempts FROM jobs WHERE id = 1")" = "queued:9000:0:1" ] \
    || fail "checkpoint: $(psql_q 'SELECT state, progress_ms, lost_gpu_ms, attempts FROM jobs WHERE id = 1')"
[ "$(psql_q "SELECT cause || ':' || attempt || ':' || ran_ms || ':' || kept_ms || ':' || lost_gpu_ms FROM job_interruptions WHERE job_id = 1")" = "checkpoint:1:9000:9000:0" ] \
    || fail "checkpoint row: $(psql_q 'SELECT * FROM job_interruptions')"
[ "$(psql_q "SELECT (inputs ->> 'progress_ms') || ':' || (inputs ->> 'next_attempt') FROM decisions WHERE kind = 'checkpoint'")" = "9000:2" ] \
    || fail "checkpoint decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'checkpoint'")"
[ "$(psql_q "SELECT count(*) FROM job_allocations WHERE job_id = 1")" = 0 ] || fail "allocation kept"

# The same plan again (the tick after a crash that lost the answer): nothing.
out=$(apply 5 10000 "{\"actions\":[$notice,$ckpt]}")
echo "$out" | grep -q '"applied": 0' || fail "replayed plan applied again: $out"
[ "$(psql_q "SELECT count(*) FROM job_interruptions")" = 1 ] || fail "checkpoint recorded twice"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'spot_notice'")" = 1 ] || fail "notice decided twice"
[ "$(psql_q "SELECT progress_ms FROM jobs WHERE id = 1")" = 9000 ] || fail "progress counted twice"

# A plain job cannot checkpoint; a requeue for another attempt is refused.
out=$(apply 5 15000 '{"actions":[{"op":"checkpoint","job":2,"node":1,"started_ms":4000,"reason":"x"},
                                  {"op":"requeue","job":2,"node":1,"started_ms":3999,"cause":"interrupted","reason":"x"}]}')
echo "$out" | grep -q '"skipped": 2' || fail "guards: $out"
[ "$(psql_q "SELECT state FROM jobs WHERE id = 2")" = running ] || fail "job 2 moved"

# Its node goes: the attempt's 16 s on 1 GPU are lost; node 1 is now empty.
out=$(apply 5 20000 '{"actions":[{"op":"requeue","job":2,"node":1,"started_ms":4000,"cause":"interrupted","reason":"node 1 interrupted: lost"},
                                  {"op":"node_gone","node":1,"state":"interrupted","reason":"reclaimed"}]}')
echo "$out" | grep -q '"applied": 2' || fail "requeue and node_gone: $out"
[ "$(psql_q "SELECT state || ':' || lost_gpu_ms || ':' || progress_ms || ':' || state_reason FROM jobs WHERE id = 2")" = "queued:16000:0:node 1 interrupted: lost" ] \
    || fail "requeue: $(psql_q 'SELECT state, lost_gpu_ms, progress_ms, state_reason FROM jobs WHERE id = 2')"
[ "$(psql_q "SELECT (inputs ->> 'lost_gpu_ms') || ':' || (inputs ->> 'attempt') || ':' || (inputs ->> 'cause') FROM decisions WHERE kind = 'requeue' AND subject_id = '2'")" = "16000:2:interrupted" ] \
    || fail "requeue decision: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'requeue'")"

# Node 2 goes with no requeue in the plan: 0002's node_gone requeues job 3
# and now counts its 30 s on 8 GPUs as lost, with a reason that says so.
apply 5 30000 '{"actions":[{"op":"node_gone","node":2,"state":"interrupted","reason":"reclaimed"}]}' >/dev/null
[ "$(psql_q "SELECT state || ':' || lost_gpu_ms FROM jobs WHERE id = 3")" = "queued:240000" ] \
    || fail "node_gone requeue: $(psql_q 'SELECT state, lost_gpu_ms FROM jobs WHERE id = 3')"
[ "$(psql_q "SELECT reason FROM decisions WHERE kind = 'requeue' AND subject_id = '3'")" = \
  "node 2 interrupted: attempt 1 lost after 30 s on 8 GPUs (0.067 GPU-hours); requeued for attempt 2" ] \
    || fail "node_gone requeue reason: $(psql_q "SELECT reason FROM decisions WHERE kind = 'requeue' AND subject_id = '3'")"

[ "$(psql_q "SELECT sum(lost_gpu_ms) FROM jobs")" = 256000 ] || fail "total lost"
[ "$(psql_q "SELECT sum(lost_gpu_ms) FROM job_interruptions")" = 256000 ] || fail "interruptions total"
# The ledger still accrues behind the same lock.
psql_q "SELECT tarmac_accrue(5, 40000)" >/dev/null || fail "accrue"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE accrual_done")" = 2 ] || fail "gone nodes not accrued to their end"
echo "1 passed, 0 failed"
