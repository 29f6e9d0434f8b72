#!/usr/bin/env bash
# Team quotas over the API and the CLI, against the real `tarmac serve`:
# who may set them (admin and finance; engineers and viewers read), bad
# input refused naming the field with nothing written (negative or
# fractional GPUs, an unknown flavor, an org that contains itself, a cycle
# of orgs through another row, an unknown team), the flavor filled in when
# the fleet has one, quotas above the fleet accepted and said once in
# `quota show`, removal, and the decisions each write leaves.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_quota_api)
write_config "$WORK/c.yaml" 2 30s 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
export HOME=$WORK/home
mkdir -p "$HOME"
unset TARMAC_TOKEN TARMAC_URL TARMAC_CLIENT_CONFIG TARMAC_CA_FILE TARMAC_CONFIG

mint() { "$TARMAC" token create --config "$WORK/c.yaml" --name "$1" --role "$2" ${3:+--team "$3"} 2>>"$WORK/token.log"; }
ADMIN=$(mint q-admin admin) || fail "token create admin"
FIN=$(mint q-fin finance) || fail "token create finance"
ENG=$(mint q-eng engineer a) || fail "token create engineer"
VIEW=$(mint q-view viewer) || fail "token create viewer"
mint q-eng-b engineer b >/dev/null || fail "token create engineer b"
mint q-eng-c engineer c >/dev/null || fail "token create engineer c"

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
wait_for 20 "grep -q 'api listening' '$WORK/serve.log'" || fail "the API never started"
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
export TARMAC_URL=http://127.0.0.1:$PORT

run() {
    local want=$1 tok=$2 rc=0; shift 2
    OUT=$(mktemp "$WORK/XXXXXXXX.out"); ERR=${OUT%.out}.err
    TARMAC_TOKEN=$tok "$TARMAC" "$@" >"$OUT" 2>"$ERR" || rc=$?
    [ "$rc" = "$want" ] || fail "tarmac $* exited $rc, expected $want: $(cat "$ERR")"
}
jq_() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($1)" "$OUT"; }
quotas() { psql_q "SELECT count(*) FROM quotas"; }
# put TOKEN TEAM BODY: the raw API, status in $CODE, body in $OUT.
put() {
    OUT=$WORK/put.json
    CODE=$(curl -s -o "$OUT" -w '%{http_code}' -X PUT -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' --data "$3" "$TARMAC_URL/v1/quotas/$2")
}

# ---- roles ------------------------------------------------------------------------
run 1 "$ENG" quota set a --gpus 8
grep -Eq '^tarmac: 403: ' "$ERR" || fail "engineer quota set: $(cat "$ERR")"
run 1 "$VIEW" quota set a --gpus 8
grep -Eq '^tarmac: 403: ' "$ERR" || fail "viewer quota set: $(cat "$ERR")"
[ "$(quotas)" = 0 ] || fail "a refused role wrote a quota"

# ---- bad input: the field named, nothing written ---------------------------------
run 1 "$FIN" quota set a --gpus 1.5
grep -q 'field gpus' "$ERR" && grep -q 'not a whole number' "$ERR" || fail "fractional gpus: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus -2
grep -q 'field gpus' "$ERR" && grep -q 'negative' "$ERR" || fail "negative gpus: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus 4 --borrowing-limit 0.5
grep -q 'field borrowing_limit' "$ERR" || fail "fractional borrowing limit: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus 4 --lending-limit -1
grep -q 'field lending_limit' "$ERR" || fail "negative lending limit: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus 4 --flavor H100
grep -q 'field flavor' "$ERR" && grep -q 'H100' "$ERR" || fail "unknown flavor: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus 4 --org a
grep -q 'field org' "$ERR" && grep -q 'contains itself' "$ERR" || fail "org in itself: $(cat "$ERR")"
run 1 "$FIN" quota set a --gpus 4 --weight 0
grep -q 'field weight' "$ERR" || fail "zero weight: $(cat "$ERR")"
run 1 "$FIN" quota set nobody --gpus 4
grep -q 'field team' "$ERR" || fail "unknown team: $(cat "$ERR")"
put "$FIN" a '{"gpus": 4, "colour": "red"}'
[ "$CODE" = 400 ] && grep -q '"field":"colour"' "$OUT" || fail "unknown field: $CODE $(cat "$OUT")"
put "$FIN" a '{"gpus": "four"}'
[ "$CODE" = 400 ] && grep -q '"field":"gpus"' "$OUT" || fail "gpus as text: $CODE $(cat "$OUT")"
put "$FIN" a '{"flavor": "A100"}'
[ "$CODE" = 400 ] && grep -q '"field":"gpus"' "$OUT" || fail "gpus missing: $CODE $(cat "$OUT")"
[ "$(quotas)" = 0 ] || fail "bad input wrote a quota"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE subject_kind = 'quota'")" = 0 ] \
    || fail "bad input wrote a decision"

# ---- set: finance and admin; the fleet's one flavor filled in ---------------------
run 0 "$FIN" quota set a --gpus 8 --borrowing-limit 4 --org research
grep -Eq '^a +A100 +8 +4 +- +research +1$' "$OUT" || fail "quota set table: $(cat "$OUT")"
[ "$(psql_q "SELECT gpus, borrowing_limit, coalesce(lending_limit, -1), org, updated_by FROM quotas WHERE team = 'a'")" \
  = "8|4|-1|research|q-fin" ] || fail "quota not stored: $(psql_q 'SELECT * FROM quotas')"
run 0 "$ADMIN" quota set b --gpus 24 --lending-limit 4 --weight 2 --output json
[ "$(jq_ 'd["team"], d["flavor"], d["gpus"], d["lending_limit"], d["weight"]')" = "b A100 24 4 2" ] \
    || fail "quota set json: $(cat "$OUT")"
# The org's own quota, named by its teams.
run 0 "$FIN" quota set research --gpus 2
# A cycle through another row: research in org a, a already in research.
run 1 "$FIN" quota set research --gpus 2 --org a
grep -q 'field org' "$ERR" || fail "cycle of orgs: $(cat "$ERR")"
[ "$(psql_q "SELECT org FROM quotas WHERE team = 'research'")" = "" ] || fail "refused change written"
[ "$(quotas)" = 3 ] || fail "quota count: $(quotas)"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'quota_set' AND subject_kind = 'quota'")" = 3 ] \
    || fail "quota_set decisions"

# ---- show: everybody reads; an overcommit said once -----------------------------
# 8 + 24 + 2 = 34 GPUs of A100 on a fleet that holds at most 32 (two
# pools of two 8-GPU nodes): an overcommit, accepted.
wait_for 20 "TARMAC_TOKEN=$VIEW '$TARMAC' quota show 2>/dev/null | grep -q '^overcommit: '" \
    || fail "no overcommit in quota show: $(TARMAC_TOKEN=$VIEW "$TARMAC" quota show 2>&1)"
run 0 "$VIEW" quota show
head -n 1 "$OUT" | grep -q '^TEAM  *FLAVOR  *ORG  *QUOTA  *USED  *BORROWED  *LENT' || fail "show header: $(cat "$OUT")"
grep -Eq '^a +A100 +research +8 +0 +0 +0 +4 ' "$OUT" || fail "show row a: $(cat "$OUT")"
grep -q 'overcommit: quotas exceed the fleet: A100 by 2 GPUs' "$OUT" || fail "overcommit line: $(cat "$OUT")"
[ "$(grep -c 'overcommit' "$OUT")" = 1 ] || fail "overcommit said more than once: $(cat "$OUT")"
run 0 "$ENG" quota show --output json
[ "$(jq_ 'sorted(q["team"] for q in d["items"])')" = "['a', 'b', 'research']" ] || fail "engineer show: $(cat "$OUT")"
# Said when it appears or changes, not every pass.
[ "$(grep -c 'quota overcommit.*by 2 GPUs' "$WORK/serve.log")" = 1 ] \
    || fail "overcommit not logged once: $(grep 'quota overcommit' "$WORK/serve.log")"
curl -s "$TARMAC_URL/metrics" >"$WORK/metrics.txt"
grep -q '^tarmac_quota_gpus{team="a",flavor="A100"} 8$' "$WORK/metrics.txt" || fail "metrics: $(grep quota "$WORK/metrics.txt")"
grep -q '^# TYPE tarmac_quota_lent_gpus gauge$' "$WORK/metrics.txt" || fail "metrics lent family"

# ---- remove ----------------------------------------------------------------------
run 1 "$ENG" quota rm b
grep -Eq '^tarmac: 403: ' "$ERR" || fail "engineer quota rm: $(cat "$ERR")"
run 0 "$FIN" quota rm b
grep -q 'removed 1 quota' "$OUT" || fail "quota rm: $(cat "$OUT")"
run 0 "$FIN" quota rm b
grep -q 'removed 0 quota' "$OUT" || fail "quota rm twice: $(cat "$OUT")"
[ "$(quotas)" = 2 ] || fail "quota rm count"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'quota_removed'")" = 1 ] || fail "quota_removed decision"
echo ok
