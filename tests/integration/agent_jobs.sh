#!/usr/bin/env bash
# The node agent end to end with the local provider: real jobs run on real
# agents, their exit codes and output tails are recorded (exit 3 -> failed
# with 3), the fake GPUs' samples reach the database, and idle nodes are
# released after their grace (their agents stopped).  An agent's token is
# refused on another node's routes and on every other route; a spent
# enrollment secret is refused; no secret reaches any log.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

e2e_start itest_agent_jobs
# Two GPUs each: one node per job.
OK=$(submit '{"team":"vision","gpus":2,"pool":"od","command":"echo hello from $TARMAC_JOB_ID; echo gpus=$CUDA_VISIBLE_DEVICES; sleep 8"}')
BAD=$(submit '{"team":"vision","gpus":2,"pool":"od","command":"echo about to fail; sleep 8; exit 3"}')
wait_job "$OK" running 40
wait_job "$BAD" running 20
NA=$(node_of_job "$OK")
NB=$(node_of_job "$BAD")
[ "$NA" != "$NB" ] || fail "both jobs on node $NA"
DA=$(node_dir "$NA")
wait_for 10 "[ -s $DA/work/token ]" || fail "node $NA's agent stored no token"
TA=$(cat "$DA/work/token")
code() { curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TA" \
    ${3:+-H 'Content-Type: application/json' --data "$3"} "$BASE$2"; }
[ "$(code POST "/v1/nodes/$NB/heartbeat" '{}')" = 403 ] || fail "node $NA's token heartbeat for node $NB"
[ "$(code POST "/v1/nodes/$NB/interruption" '{"reason":"x"}')" = 403 ] || fail "node $NA's token notice for node $NB"
[ "$(code POST "/v1/nodes/$NB/jobs/$BAD/exit" '{"attempt":1,"exit_code":0,"reason":"exited"}')" = 403 ] \
    || fail "node $NA's token reporting node $NB's job"
[ "$(code GET /v1/jobs)" = 403 ] || fail "an agent token listed jobs"
SA=$(cat "$DA/work/enroll.secret")
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
      --data "{\"node_id\":$NA,\"secret\":\"$SA\"}" "$BASE/v1/agent/enroll")" = 401 ] \
    || fail "a spent enrollment secret was accepted"
wait_job "$OK" succeeded 40
wait_job "$BAD" failed 20
[ "$(psql_q "SELECT exit_code FROM jobs WHERE id = $OK")" = 0 ] || fail "exit code of the good job"
[ "$(psql_q "SELECT exit_code FROM jobs WHERE id = $BAD")" = 3 ] || fail "exit code 3 not recorded"
psql_q "SELECT output_tail FROM jobs WHERE id = $OK" | grep -qx "hello from $OK" || fail "output tail of the good job: $(psql_q "SELECT output_tail FROM jobs WHERE id = $OK")"
psql_q "SELECT output_tail FROM jobs WHERE id = $OK" | grep -q "gpus=GPU-local-" || fail "CUDA_VISIBLE_DEVICES did not carry the fake GPU's uuid"
psql_q "SELECT output_tail FROM jobs WHERE id = $BAD" | grep -qx "about to fail" || fail "output tail of the failed job"
N=$(psql_q "SELECT node_id FROM jobs WHERE id = $OK")
# A stopped job's program gets its grace even though the shell that runs
# its command dies of the signal at once: a cancelled job that saves for
# a second after SIGTERM (within the 2 s grace) finishes its save.
M=$WORK/save
mkdir -p "$M" && chmod 1777 "$M"
SAVE=$(submit "{\"team\":\"vision\",\"gpus\":2,\"pool\":\"od\",\"command\":\"python3 -c 'import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1), open(\\\"$M/saved\\\", \\\"w\\\").close(), sys.exit(0))); open(\\\"$M/ready\\\", \\\"w\\\").close(); time.sleep(300)'\"}")
wait_for 40 "[ -e $M/ready ]" || fail "the saving job never started: $(psql_q "SELECT state, state_reason FROM jobs WHERE id = $SAVE")"
api POST "/v1/jobs/$SAVE/cancel" '{}' >/dev/null
wait_job "$SAVE" cancelled 15
wait_for 10 "[ -e $M/saved ]" || fail "the cancelled job was killed in the middle of its save (within its grace)"
# The fake GPUs' samples (50 % here) reached the database.
wait_for 10 "[ \"\$(psql_q \"SELECT count(*) FROM gpu_samples WHERE node_id = $N AND util_percent = 50\")\" -ge 1 ]" \
    || fail "no GPU samples from node $N"
# Idle nodes are released after their grace, and their agents stop.
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state NOT IN ('terminated', 'interrupted')\")\" = 0 ]" \
    || fail "nodes not released: $(psql_q "SELECT id, state FROM nodes")"
wait_for 20 '[ "$(agent_pid '"$N"')" = 0 ]' || fail "node $N's agent still runs after release"
secrets_absent
echo "1 passed, 0 failed"
