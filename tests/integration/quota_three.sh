#!/usr/bin/env bash
# Three teams, no reclaim cycle, live with the sim cloud: a fleet of two
# 8-GPU nodes; teams a and b are guaranteed 8 GPUs each, team c none.
# c's two preemptible, checkpointable jobs borrow everything; a and b each
# submit a job within its quota; each of c's jobs is reclaimed once, for
# a and for b, a's and b's jobs run, c's wait on quota and resume once
# they end, and no job is reclaimed twice.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_quota_three)
write_config "$WORK/c.yaml" 2 30s 1s 300ms
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
for t in a b; do
    "$TARMAC" token create --config "$WORK/c.yaml" --name "q-$t" --role engineer --team "$t" >/dev/null 2>&1 \
        || fail "token $t"
done
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
wait_for 20 "grep -q 'api listening' '$WORK/serve.log'" || fail "the API never started"
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
export TARMAC_URL=http://127.0.0.1:$PORT
TARMAC_TOKEN=$FIN "$TARMAC" quota set a --gpus 8 >/dev/null || fail "quota set a"
TARMAC_TOKEN=$FIN "$TARMAC" quota set b --gpus 8 >/dev/null || fail "quota set b"

submit() { "$TARMAC" db submit --config "$WORK/c.yaml" --output json "$@" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])'; }
state() { psql_q "SELECT state FROM jobs WHERE id = $1"; }
reclaims() { psql_q "SELECT count(*) FROM decisions WHERE inputs ? 'quota_reclaim'"; }

C1=$(submit --team c --gpus 8 --preemptible --checkpointable --runtime 8s --estimate 8s --name c1)
C2=$(submit --team c --gpus 8 --preemptible --checkpointable --runtime 8s --estimate 8s --name c2)
wait_for 30 "[ \"\$(state $C1)\" = running ] && [ \"\$(state $C2)\" = running ]" \
    || fail "c's jobs never ran: $(psql_q "SELECT id, state, state_reason FROM jobs")"
A=$(submit --team a --gpus 8 --runtime 3s --estimate 3s --name a1)
B=$(submit --team b --gpus 8 --runtime 3s --estimate 3s --name b1)
wait_for 30 "[ \"\$(state $A)\" != queued ] && [ \"\$(state $B)\" != queued ]" \
    || fail "a's and b's jobs never ran: $(psql_q "SELECT id, team, state, state_reason FROM jobs")"
[ "$(reclaims)" = 2 ] || fail "reclaims: $(psql_q "SELECT subject_id, reason FROM decisions WHERE inputs ? 'quota_reclaim'")"
[ "$(psql_q "SELECT string_agg(inputs ->> 'for_team', ',' ORDER BY inputs ->> 'for_team') FROM decisions
             WHERE inputs ? 'quota_reclaim'")" = "a,b" ] || fail "not one reclaim for each owner"
[ "$(psql_q "SELECT count(DISTINCT subject_id) FROM decisions WHERE inputs ? 'quota_reclaim'")" = 2 ] \
    || fail "a job reclaimed twice"
wait_for 60 "[ \"\$(state $C1)\" = succeeded ] && [ \"\$(state $C2)\" = succeeded ]" \
    || fail "c's jobs never finished: $(psql_q "SELECT id, team, state, state_reason FROM jobs")"
[ "$(state $A)" = succeeded ] && [ "$(state $B)" = succeeded ] || fail "a's or b's job did not finish"
[ "$(reclaims)" = 2 ] || fail "a reclaim cycle: $(reclaims) reclaims"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE team = 'c' AND progress_ms > 0")" = 2 ] \
    || fail "c's jobs did not keep their progress"
echo ok
