#!/usr/bin/env bash
# An interruption notice from the node's own metadata service, end to end:
#   agent_notice.sh aws|gcp|azure|local
# The local provider's agents poll that cloud's loopback fake
# (tests/lib/metadata_fixture.py; for local, the node's notice file,
# written by `tarmac local interrupt`).  A
# checkpointable job writes a checkpoint and runs on; the fake announces
# the interruption for its node; the agent posts the notice, the node is
# drained, the job gets its checkpoint signal and is requeued, and the next
# attempt, on another node, resumes from the checkpoint (the first
# attempt's complete folder, given as TARMAC_RESUME_DIR).  Azure's event is acknowledged once drained.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

CLOUD=${1:?cloud}
MD=
if [ "$CLOUD" != local ]; then
    python3 "$TM_SOURCE_DIR/tests/lib/metadata_fixture.py" --cloud "$CLOUD" --detach \
        --port-file "$WORK/md.port" >"$WORK/md.out" 2>"$WORK/fixture.log" &
    PIDS+=("$!")
    wait_for 20 "[ -s $WORK/md.port ]" || fail "the metadata fake did not start"
    MD=http://127.0.0.1:$(cat "$WORK/md.port")
fi
e2e_start "itest_agent_notice_$CLOUD" "$CLOUD" "$MD"

J=$(submit '{"team":"vision","gpus":2,"pool":"spot","preemptible":true,"checkpointable":true,"command":"d=$TARMAC_CHECKPOINT_DIR; mkdir -p \"$d\"; if [ -n \"$TARMAC_RESUME_DIR\" ]; then echo resumed from $(cat \"$TARMAC_RESUME_DIR/ckpt\") at attempt $TARMAC_ATTEMPT; exit 0; fi; trap \"echo checkpointed; exit 143\" TERM; echo step-1 > \"$d/ckpt\"; echo ok > \"$d/.c\" && mv \"$d/.c\" \"$d/COMPLETE\"; while :; do sleep 0.2; done"}')
wait_job "$J" running 40
N=$(node_of_job "$J")
CK=$(psql_q "SELECT count(*) FROM jobs WHERE id = $J")
wait_for 10 "ls $WORK/ckpt/job-$J/attempt-1/COMPLETE >/dev/null 2>&1" || fail "the job wrote no complete checkpoint in its attempt's folder under the pool's checkpoint_dir"

case $CLOUD in
local)
    # On demand, as a demo would: `tarmac local interrupt` writes the
    # node's notice file (tm_local_interrupt).  Bad input first: refused,
    # nothing written.
    D=$(node_dir "$N")
    rc=0; "$TARMAC" local interrupt "$N" --config "$WORK/c.yaml" --in soon 2>"$WORK/local.err" || rc=$?
    [ "$rc" = 2 ] && grep -q -- "--in" "$WORK/local.err" || fail "a bad --in was not refused naming it (exit $rc)"
    rc=0; "$TARMAC" local interrupt 999999 --config "$WORK/c.yaml" 2>"$WORK/local.err" || rc=$?
    [ "$rc" = 2 ] && grep -q "no live local node" "$WORK/local.err" || fail "an unknown node was not refused (exit $rc)"
    [ ! -e "$D/notice.json" ] || fail "a refused interrupt wrote a notice"
    "$TARMAC" local interrupt "$N" --config "$WORK/c.yaml" --in 60s >"$WORK/local.out" 2>"$WORK/local.err" \
        || fail "tarmac local interrupt: $(cat "$WORK/local.err")"
    [ -s "$D/notice.json" ] || fail "tarmac local interrupt wrote no notice file" ;;
*)
    curl -fsS -X POST "$MD/_fixture/interrupt?node=$N&in=60" >/dev/null || fail "could not raise the notice" ;;
esac

# The notice drains the node and the job moves, resuming from its checkpoint.
wait_for 20 "[ \"\$(psql_q \"SELECT state FROM nodes WHERE id = $N\")\" != ready ]" \
    || fail "node $N not drained after the notice: $(psql_q "SELECT state FROM nodes WHERE id = $N")"
wait_job "$J" succeeded 60
[ "$(psql_q "SELECT node_id FROM jobs WHERE id = $J")" != "$N" ] || fail "the job resumed on the interrupted node"
psql_q "SELECT output_tail FROM jobs WHERE id = $J" | grep -q "resumed from step-1 at attempt 2" \
    || fail "the job did not resume from its checkpoint: $(psql_q "SELECT attempts, output_tail FROM jobs WHERE id = $J")"
[ "$(psql_q "SELECT count(*) FROM job_interruptions WHERE job_id = $J")" -ge 1 ] || fail "no interruption recorded for the job"
if [ "$CLOUD" = azure ]; then
    wait_for 20 "curl -fsS '$MD/_fixture/state?node=$N' | grep -q '\"acks\": \[\"'" \
        || fail "the agent never acknowledged the scheduled event: $(curl -fsS "$MD/_fixture/state?node=$N")"
fi
if [ "$CLOUD" != local ]; then
    curl -fsS "$MD/_fixture/state?node=$N" | grep -q '"bad_headers": 0' || fail "the agent's metadata requests lacked a required header"
fi
secrets_absent
echo "1 passed, 0 failed"
