#!/usr/bin/env bash
# Lend and reclaim live, with the sim cloud and a real PostgreSQL: a fleet
# of one 8-GPU node; team a is guaranteed all 8, team b none.  b's
# preemptible, checkpointable job borrows a's idle quota; a submits; b's
# job is checkpointed and requeued (one decision naming the job, for whom
# and the GPU-time redone) and a's runs; b waits on quota meanwhile (said
# in its reason and decision) and resumes from its checkpoint once a's job
# ends.  a's quota cannot be removed while it lends and b borrows... the
# borrower's (b has no quota) and a team's quota while it borrows is
# refused.  Then quota and budget together: a hard cap holds a's next job
# although its quota admits it, and the decision says budget.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_quota_live)
write_config "$WORK/c.yaml" 1 30s 1s 300ms
# One on-demand pool of one node: no room but what the quota decides.
python3 - "$WORK/c.yaml" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read()
s = s[:s.index("  - name: spot\n")]
open(p, "w").write(s)
PY
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
export HOME=$WORK/home
mkdir -p "$HOME"
unset TARMAC_TOKEN TARMAC_URL TARMAC_CLIENT_CONFIG TARMAC_CA_FILE TARMAC_CONFIG
FIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name q-fin --role finance 2>/dev/null) || fail "token"
"$TARMAC" token create --config "$WORK/c.yaml" --name q-a --role engineer --team a >/dev/null 2>&1 || fail "token a"

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
wait_for 20 "grep -q 'api listening' '$WORK/serve.log'" || fail "the API never started"
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
export TARMAC_URL=http://127.0.0.1:$PORT
TARMAC_TOKEN=$FIN "$TARMAC" quota set a --gpus 8 >/dev/null || fail "quota set a"

submit() { "$TARMAC" db submit --config "$WORK/c.yaml" --output json "$@" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])'; }
state() { psql_q "SELECT state FROM jobs WHERE id = $1"; }

# b borrows a's idle quota.
B=$(submit --team b --gpus 8 --preemptible --checkpointable --runtime 300s --estimate 300s --name borrower)
wait_for 30 "[ \"\$(state $B)\" = running ]" || fail "b's job never ran: $(psql_q "SELECT state, state_reason FROM jobs WHERE id = $B")"
wait_for 10 "TARMAC_TOKEN=$FIN '$TARMAC' quota show 2>/dev/null | grep -Eq '^a +A100 +- +8 +0 +0 +8 '" \
    || fail "b's borrowing not shown: $(TARMAC_TOKEN=$FIN "$TARMAC" quota show 2>&1)"
TARMAC_TOKEN=$FIN "$TARMAC" quota show >"$WORK/show.txt" || fail "quota show"
grep -Eq '^a +A100 +- +8 +0 +0 +8 ' "$WORK/show.txt" || fail "a lends 8: $(cat "$WORK/show.txt")"

# a submits within its quota: b's job is checkpointed for it.
A=$(submit --team a --gpus 8 --runtime 4s --estimate 4s --name owner)
wait_for 30 "[ \"\$(state $A)\" = running ] || [ \"\$(state $A)\" = succeeded ]" \
    || fail "a's job never ran: $(psql_q "SELECT state, state_reason FROM jobs WHERE id = $A")"
R=$(psql_q "SELECT reason FROM decisions WHERE kind = 'checkpoint' AND subject_id = '$B'")
echo "$R" | grep -q "quota reclaim: job $B of team b borrowed team a's quota of A100; checkpointed for job $A" \
    || fail "no reclaim decision: $(psql_q "SELECT kind, reason FROM decisions WHERE subject_id = '$B'")"
[ "$(psql_q "SELECT inputs ->> 'for_team', inputs ->> 'redone_gpu_ms', inputs ->> 'disruption'
             FROM decisions WHERE kind = 'checkpoint' AND subject_id = '$B'")" = "a|0|quota_reclaim" ] \
    || fail "reclaim inputs: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'checkpoint' AND subject_id = '$B'")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE inputs ? 'quota_reclaim'")" = 1 ] || fail "reclaimed more than once"
# Meanwhile b waits on quota, and says so.
wait_for 10 "psql_q \"SELECT state_reason FROM jobs WHERE id = $B\" | grep -q 'waits on quota'" \
    || [ "$(state $B)" = running ] || fail "b's wait: $(psql_q "SELECT state, state_reason FROM jobs WHERE id = $B")"
# b resumes from its checkpoint once a's job ends.
wait_for 40 "[ \"\$(state $A)\" = succeeded ] && [ \"\$(state $B)\" = running ]" \
    || fail "b never resumed: $(psql_q "SELECT id, state, state_reason FROM jobs")"
[ "$(psql_q "SELECT attempts > 1, progress_ms > 0 FROM jobs WHERE id = $B")" = "t|t" ] \
    || fail "b did not resume from its checkpoint: $(psql_q "SELECT attempts, progress_ms FROM jobs WHERE id = $B")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE inputs ? 'quota_reclaim'")" = 1 ] || fail "a reclaim loop"

# A team's quota is not removed while the team borrows.
TARMAC_TOKEN=$FIN "$TARMAC" quota set b --gpus 0 >/dev/null || fail "quota set b"
wait_for 10 "TARMAC_TOKEN=$FIN '$TARMAC' quota show --output json 2>/dev/null \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if any(q[\"team\"]==\"b\" and q.get(\"borrowed\")==8 for q in d[\"items\"]) else 1)'" \
    || fail "b's borrowing under its quota not shown"
rc=0; TARMAC_TOKEN=$FIN "$TARMAC" quota rm b >"$WORK/rm.out" 2>"$WORK/rm.err" || rc=$?
[ "$rc" = 1 ] && grep -q '409' "$WORK/rm.err" && grep -q 'field team' "$WORK/rm.err" && grep -q 'borrows 8 GPUs' "$WORK/rm.err" \
    || fail "quota rm while borrowing: rc $rc $(cat "$WORK/rm.err")"
[ "$(psql_q "SELECT count(*) FROM quotas WHERE team = 'b'")" = 1 ] || fail "the refused removal wrote"

# Quota and budget together: a's hard cap of nothing holds its next job
# although its quota admits it (the reclaim would), and the decision says
# budget; no reclaim is made for a job the budget holds.
TARMAC_TOKEN=$FIN "$TARMAC" budget set a --cap-cents 0 --hard >/dev/null || fail "budget set a"
A2=$(submit --team a --gpus 8 --runtime 4s --estimate 4s --name capped)
wait_for 10 "psql_q \"SELECT state_reason FROM jobs WHERE id = $A2\" | grep -q '^budget: '" \
    || fail "a's capped job: $(psql_q "SELECT state, state_reason FROM jobs WHERE id = $A2")"
sleep 2
[ "$(state $A2)" = queued ] || fail "the capped job ran"
[ "$(state $B)" = running ] || fail "b was reclaimed for a job its budget holds"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE inputs ? 'quota_reclaim'")" = 1 ] || fail "reclaim for a held job"
[ "$(psql_q "SELECT inputs ->> 'held_by' FROM decisions WHERE kind = 'wait' AND subject_id = '$A2'
             ORDER BY id DESC LIMIT 1")" = budget ] || fail "the budget's wait does not say budget"
# And the other way round: b's job, which its budget (none) admits, waits
# on quota while a's quota is in use, and its decision says quota.
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'wait' AND subject_id = '$B'
             AND inputs ->> 'held_by' = 'quota'")" -ge 1 ] || fail "b's quota wait does not say quota"
echo ok
