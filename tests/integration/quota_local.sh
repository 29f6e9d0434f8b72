#!/usr/bin/env bash
# Lend and reclaim with the local provider: real agents, real jobs.  A
# fleet of one 2-GPU on-demand node (the spot pool held at 0); team a is
# guaranteed both GPUs, team b nothing.  b's preemptible, checkpointable
# job borrows a's idle quota and writes a checkpoint; a submits; the tick
# reclaims b's job (one decision naming it, for team a, nothing redone),
# the agent gives it its checkpoint signal and it is requeued; a's job
# runs; b waits on quota and, once a's job ends, resumes from its
# checkpoint (TARMAC_RESUME_DIR) at attempt 2.  One reclaim, no loop.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

E2E_OD_MAX=1 E2E_SPOT_MAX=0 e2e_start itest_quota_local
"$TARMAC" token create --config "$WORK/c.yaml" --name eng-a --role engineer --team a >/dev/null 2>&1 \
    || fail "token a"
api PUT /v1/quotas/a '{"gpus": 2, "flavor": "A100"}' >/dev/null || fail "quota set a"

B=$(submit '{"team":"b","gpus":2,"pool":"od","preemptible":true,"checkpointable":true,"command":"d=$TARMAC_CHECKPOINT_DIR; mkdir -p \"$d\"; if [ -n \"$TARMAC_RESUME_DIR\" ]; then echo resumed from $(cat \"$TARMAC_RESUME_DIR/ckpt\") at attempt $TARMAC_ATTEMPT; exit 0; fi; trap \"echo checkpointed; exit 143\" TERM; echo step-1 > \"$d/ckpt\"; echo ok > \"$d/.c\" && mv \"$d/.c\" \"$d/COMPLETE\"; while :; do sleep 0.2; done"}')
wait_job "$B" running 40
wait_for 10 "ls $WORK/ckpt/job-$B/attempt-1/COMPLETE >/dev/null 2>&1" || fail "b's job wrote no checkpoint"

A=$(submit '{"team":"a","gpus":2,"command":"sleep 2; echo owner done"}')
wait_job "$A" 'running|succeeded' 40
R=$(psql_q "SELECT reason FROM decisions WHERE kind = 'checkpoint' AND subject_id = '$B' AND inputs ? 'quota_reclaim'")
echo "$R" | grep -q "quota reclaim: job $B of team b borrowed team a's quota of A100; checkpointed for job $A, nothing redone" \
    || fail "no reclaim decision: $(psql_q "SELECT kind, reason FROM decisions WHERE subject_id = '$B'")"
[ "$(psql_q "SELECT cause, kept_ms > 0 FROM job_interruptions WHERE job_id = $B")" = "checkpoint|t" ] \
    || fail "b's interruption: $(psql_q "SELECT * FROM job_interruptions WHERE job_id = $B")"
wait_job "$A" succeeded 40
wait_job "$B" succeeded 60
psql_q "SELECT output_tail FROM jobs WHERE id = $B" | grep -q "resumed from step-1 at attempt 2" \
    || fail "b did not resume from its checkpoint: $(psql_q "SELECT attempts, output_tail FROM jobs WHERE id = $B")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE inputs ? 'quota_reclaim'")" = 1 ] || fail "more than one reclaim"
secrets_absent
echo "1 passed, 0 failed"
