#!/usr/bin/env bash
# The CLI over the HTTP API, against the real `tarmac serve`: every contract
# command in table and json form with its content checked against the
# database, roles refused with the server's message, local bad input
# refused before any request (exit 2, nothing written), the token never
# printed, a client config that others may read refused.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_cli_api)
write_config "$WORK/c.yaml" 2 30s 1s 300ms   # listen 127.0.0.1:0: a free port
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
# Nothing from the machine's own user may leak in: no client file, no token.
export HOME=$WORK/home
mkdir -p "$HOME"
unset TARMAC_TOKEN TARMAC_URL TARMAC_CLIENT_CONFIG TARMAC_CA_FILE TARMAC_CONFIG

mint() { "$TARMAC" token create --config "$WORK/c.yaml" --name "$1" --role "$2" ${3:+--team "$3"} 2>>"$WORK/token.log"; }
ADMIN=$(mint cli-admin admin) || fail "token create admin"
FIN=$(mint cli-fin finance) || fail "token create finance"
ENG=$(mint cli-eng engineer a) || fail "token create engineer"
VIEW=$(mint cli-view viewer) || fail "token create viewer"

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
wait_for 20 "grep -q 'api listening' '$WORK/serve.log'" || fail "the API never started"
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
[ -n "$PORT" ] && [ "$PORT" != 0 ] || fail "no port in the log"
export TARMAC_URL=http://127.0.0.1:$PORT

# Every command's output is kept under $WORK/o/ for the token check at the end.
mkdir -p "$WORK/o"
# run EXPECTED_RC TOKEN ARGS...: run tarmac with TOKEN (or none for "-"),
# check its exit status; stdout in $OUT, stderr in $ERR.
run() {
    local want=$1 tok=$2 rc=0; shift 2
    OUT=$(mktemp "$WORK/o/XXXXXXXX.out"); ERR=${OUT%.out}.err
    if [ "$tok" = - ]; then
        "$TARMAC" "$@" >"$OUT" 2>"$ERR" || rc=$?
    else
        TARMAC_TOKEN=$tok "$TARMAC" "$@" >"$OUT" 2>"$ERR" || rc=$?
    fi
    [ "$rc" = "$want" ] || fail "tarmac $* exited $rc, expected $want: $(cat "$ERR")"
}
jq_() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($1)" "$OUT"; }
jobs_in_db() { psql_q "SELECT count(*) FROM jobs"; }

# ---- no token, bad input: refused before any request --------------------------
run 2 - jobs
grep -q 'no API token' "$ERR" && grep -q TARMAC_TOKEN "$ERR" || fail "no token: unclear: $(cat "$ERR")"
run 2 "$ENG" submit --team a --gpus 0
grep -q -- '--gpus' "$ERR" || fail "bad --gpus not named: $(cat "$ERR")"
run 2 "$ENG" submit --team a --gpus 1 --bogus
grep -q -- '--bogus' "$ERR" || fail "unknown flag not named: $(cat "$ERR")"
run 2 "$ENG" submit --team a --gpus 1 --runtime 5s
grep -q -- '--runtime' "$ERR" && grep -q 'db submit' "$ERR" || fail "--runtime: $(cat "$ERR")"
run 2 "$ENG" submit --team a --gpus 1 --database-url "$DB"
grep -q 'db submit' "$ERR" || fail "--database-url on an API command: $(cat "$ERR")"
run 2 "$ENG" jobs --state sleeping
grep -q -- '--state' "$ERR" || fail "bad --state: $(cat "$ERR")"
run 2 "$FIN" budget set a --cap-cents -5
grep -q -- '--cap-cents' "$ERR" || fail "bad --cap-cents: $(cat "$ERR")"
run 2 "$FIN" budget set a --cap-cents 100 --warn-percent 101
grep -q -- '--warn-percent' "$ERR" || fail "bad --warn-percent: $(cat "$ERR")"
run 2 "$ENG" why job twelve
run 2 "$ENG" why pool x
run 2 "$ENG" jobs --url ftp://example.invalid/
grep -q -- '--url' "$ERR" || fail "bad --url: $(cat "$ERR")"
[ "$(jobs_in_db)" = 0 ] || fail "a refused command wrote a job"
[ "$(psql_q 'SELECT count(*) FROM budgets')" = 0 ] || fail "a refused command wrote a budget"

# ---- submit: table and json ------------------------------------------------------
run 0 "$ENG" submit --team a --gpus 1 --estimate 1h --name train-a --count 2
[ "$(grep -c 'train-a' "$OUT")" = 2 ] || fail "submit table: $(cat "$OUT")"
head -n 1 "$OUT" | grep -q '^ID  *TEAM' || fail "submit table header: $(cat "$OUT")"
run 0 "$ENG" submit --team a --gpu-milli 250 --class inference --preemptible --estimate 30m --output json
[ "$(jq_ 'len(d)')" = 1 ] || fail "submit json: $(cat "$OUT")"
[ "$(jq_ 'd[0]["gpu_milli"], d[0]["class"], d[0]["preemptible"], d[0]["runtime_estimate_s"]')" = "250 inference True 1800" ] \
    || fail "submit json fields: $(cat "$OUT")"
JOB3=$(jq_ 'd[0]["id"]')
[ "$(psql_q "SELECT gpu_milli, class, preemptible, runtime_estimate_ms FROM jobs WHERE id = $JOB3")" = "250|inference|t|1800000" ] \
    || fail "job $JOB3 not stored as submitted"
[ "$(jobs_in_db)" = 3 ] || fail "3 jobs expected, $(jobs_in_db) stored"

# A viewer may not submit: the server's 403, exit 1, nothing written.
run 1 "$VIEW" submit --team a --gpus 1
grep -Eq '^tarmac: 403: ' "$ERR" || fail "viewer submit: $(cat "$ERR")"
# An engineer may not submit for another team.
run 1 "$ENG" submit --team b --gpus 1
grep -Eq '^tarmac: 403: ' "$ERR" || fail "engineer submit for team b: $(cat "$ERR")"
# An unknown pool is the server's to know: its 400 names the field.
run 1 "$ENG" submit --team a --gpus 1 --pool nosuchpool
grep -Eq '^tarmac: 400: .*\(field pool\)' "$ERR" || fail "unknown pool: $(cat "$ERR")"
# A revoked or unknown token: 401.
run 1 "tmk_not_a_real_token" jobs
grep -Eq '^tarmac: 401: ' "$ERR" || fail "unknown token: $(cat "$ERR")"
[ "$(jobs_in_db)" = 3 ] || fail "a refused submit wrote a job"

# ---- jobs: table, json, filters, paging -----------------------------------------
run 0 "$VIEW" jobs
[ "$(grep -Ec '^[0-9]+ +a ' "$OUT")" = 3 ] || fail "jobs table: $(cat "$OUT")"
run 0 "$VIEW" jobs --output json
[ "$(jq_ 'len(d["items"]), d["next_cursor"]')" = "3 None" ] || fail "jobs json: $(cat "$OUT")"
[ "$(jq_ 'sorted(j["id"] for j in d["items"]) == sorted(j["id"] for j in d["items"]) and d["items"][0]["id"] > d["items"][-1]["id"]')" = True ] \
    || fail "jobs not newest first"
# More than one server page (100): the CLI follows next_cursor.
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --pool spot --estimate 1h --count 150 >/dev/null
run 0 "$VIEW" jobs --team b --all --output json
[ "$(jq_ 'len(d["items"]), len(set(j["id"] for j in d["items"])), d["next_cursor"]')" = "150 150 None" ] \
    || fail "jobs --all did not follow the pages: $(jq_ 'len(d["items"])')"
run 0 "$VIEW" jobs --team b --limit 120 --output json
[ "$(jq_ 'len(d["items"])')" = 120 ] && [ "$(jq_ 'd["next_cursor"] is not None')" = True ] \
    || fail "jobs --limit 120"
run 0 "$VIEW" jobs --limit 2 --output json
[ "$(jq_ 'len(d["items"])')" = 2 ] || fail "jobs --limit 2"
# An engineer sees its own team's jobs only.
run 0 "$ENG" jobs --all --output json
[ "$(jq_ 'sorted(set(j["team"] for j in d["items"]))')" = "['a']" ] || fail "engineer saw other teams' jobs"
run 0 "$VIEW" jobs show "$JOB3" --output json
[ "$(jq_ 'd["id"], d["team"]')" = "$JOB3 a" ] || fail "jobs show: $(cat "$OUT")"

# ---- nodes, pools, decisions, why --------------------------------------------------
wait_for 30 "psql_q \"SELECT count(*) FROM decisions WHERE subject_kind = 'job' AND subject_id = '$JOB3' AND kind = 'place'\" | grep -qx 1" \
    || fail "job $JOB3 was never placed"
run 0 "$VIEW" why job "$JOB3"
grep -q "^job $JOB3 (team a" "$OUT" || fail "why: no subject line: $(cat "$OUT")"
grep -Eq '^  [0-9-]+ [0-9:]+ UTC  place ' "$OUT" || fail "why: no place decision: $(cat "$OUT")"
reason=$(psql_q "SELECT reason FROM decisions WHERE subject_kind = 'job' AND subject_id = '$JOB3' AND kind = 'place'")
grep -qF -- "$reason" "$OUT" || fail "why: the place decision's reason is missing: $(cat "$OUT")"
run 0 "$VIEW" why "job:$JOB3" --output json
[ "$(jq_ 'd["job"]["id"], "place" in [x["kind"] for x in d["decisions"]["items"]]')" = "$JOB3 True" ] \
    || fail "why json: $(cat "$OUT")"
run 1 "$VIEW" why job 999999
grep -Eq '^tarmac: 404: ' "$ERR" || fail "why for a missing job: $(cat "$ERR")"
NODE=$(psql_q "SELECT node_id FROM job_allocations WHERE job_id = $JOB3 LIMIT 1")
run 0 "$VIEW" why node "$NODE"
grep -q "^node $NODE (pool " "$OUT" && grep -q ' launch\| request_node' "$OUT" || fail "why node: $(cat "$OUT")"

run 0 "$VIEW" nodes
grep -Eq "^$NODE +(od|spot) " "$OUT" || fail "nodes table: $(cat "$OUT")"
# The controller keeps running: a node may end between the two reads, so
# the count is compared again (a few times) until both reads agree.
same=0
for _ in 1 2 3 4 5; do
    run 0 "$VIEW" nodes --output json
    if [ "$(jq_ 'len(d["items"])')" = "$(psql_q "SELECT count(*) FROM nodes WHERE state NOT IN ('terminated', 'interrupted')")" ]; then
        same=1; break
    fi
    sleep 0.5
done
[ "$same" = 1 ] || fail "nodes json: $(cat "$OUT")"
run 0 "$VIEW" pools
grep -Eq '^od +sim +A100 +8 +on_demand ' "$OUT" && grep -Eq '^spot +sim ' "$OUT" || fail "pools table: $(cat "$OUT")"
run 0 "$VIEW" pools --output json
[ "$(jq_ '[p["name"] for p in d["items"]]')" = "['od', 'spot']" ] || fail "pools json: $(cat "$OUT")"
run 0 "$VIEW" decisions --subject "job:$JOB3" --output json
[ "$(jq_ 'all(x["subject_id"] == "'"$JOB3"'" for x in d["items"]) and len(d["items"]) > 0')" = True ] \
    || fail "decisions --subject: $(cat "$OUT")"
run 0 "$VIEW" decisions --kind place --limit 3
[ "$(grep -c ' place ' "$OUT")" = "$(wc -l <"$OUT" | awk '{print $1 - 1}')" ] || fail "decisions --kind: $(cat "$OUT")"

# ---- jobs cancel ---------------------------------------------------------------------
JOB1=$(psql_q "SELECT min(id) FROM jobs WHERE team = 'a'")
run 1 "$VIEW" jobs cancel "$JOB1"
grep -Eq '^tarmac: 403: ' "$ERR" || fail "viewer cancel: $(cat "$ERR")"
run 0 "$ENG" jobs cancel "$JOB1" --reason "not needed" --output json
[ "$(jq_ 'd["state"]')" = cancelled ] || fail "cancel json: $(cat "$OUT")"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $JOB1")" = cancelled ] || fail "cancel not stored"
# retag: a queued job's preemptible tag (team b's wait in a pool nothing fills).
JOBB=$(psql_q "SELECT max(id) FROM jobs WHERE team = 'b' AND state = 'queued'")
run 2 "$ADMIN" jobs retag "$JOBB"
grep -q -- '--preemptible' "$ERR" || fail "retag without a tag: $(cat "$ERR")"
run 0 "$ADMIN" jobs retag "$JOBB" --preemptible
grep -Eq "^$JOBB +b .* yes " "$OUT" || fail "retag table: $(cat "$OUT")"
[ "$(psql_q "SELECT preemptible FROM jobs WHERE id = $JOBB")" = t ] || fail "retag not stored"
run 1 "$ADMIN" jobs retag "$JOB1" --no-preemptible
grep -Eq '^tarmac: 409: ' "$ERR" || fail "retag of a cancelled job: $(cat "$ERR")"

# ---- budgets and spend ------------------------------------------------------------------
run 1 "$ENG" budget set a --cap-cents 500000
grep -Eq '^tarmac: 403: ' "$ERR" || fail "engineer budget set: $(cat "$ERR")"
run 1 "$FIN" budget set nobody --cap-cents 500000
grep -Eq '^tarmac: 400: .*\(field team\)' "$ERR" || fail "budget for an unknown team: $(cat "$ERR")"
run 0 "$FIN" budget set a --cap-cents 500000 --hard --warn-percent 70
grep -Eq '^a +team +month +5000\.00 +yes +70$' "$OUT" || fail "budget set table: $(cat "$OUT")"
[ "$(psql_q "SELECT cap_cents, hard, warn_percent FROM budgets WHERE scope = 'a'")" = "500000|t|70" ] \
    || fail "budget not stored"
run 0 "$FIN" budget set acme --org --cap-cents 9000000 --output json
[ "$(jq_ 'd["scope_kind"], d["cap_cents"], d["hard"]')" = "org 9000000 False" ] || fail "org budget: $(cat "$OUT")"
run 0 "$VIEW" budget show
grep -Eq '^a +team +[0-9]{4}-[0-9]{2} +5000\.00 +[0-9]+\.[0-9]{2} +[0-9.]+% +yes +70$' "$OUT" \
    || fail "budget show table: $(cat "$OUT")"
run 0 "$VIEW" budget show --output json
[ "$(jq_ 'sorted((b["scope"], b["cap_cents"]) for b in d["items"])')" = "[('a', 500000), ('acme', 9000000)]" ] \
    || fail "budget show json: $(cat "$OUT")"
run 0 "$ENG" budget show --output json
[ "$(jq_ '[b["scope"] for b in d["items"]]')" = "['a']" ] || fail "engineer sees other budgets"

run 0 "$FIN" spend --output json
total=$(jq_ 'd["total_cents"]')
ledger=$(psql_q "SELECT coalesce(sum(cents), 0) FROM spend WHERE period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')")
[ "$total" -le "$ledger" ] || fail "spend: the CLI says $total cents, the ledger (read later) $ledger"
run 0 "$FIN" spend
grep -q '^period [0-9]\{4\}-[0-9]\{2\} (USD' "$OUT" && grep -q '^TEAM  *SPENT_USD' "$OUT" && grep -q '^POOL  *JOBS_USD' "$OUT" \
    || fail "spend table: $(cat "$OUT")"
wait_for 60 "TARMAC_TOKEN=$FIN '$TARMAC' spend --team a --output json | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"teams\"] and d[\"teams\"][0][\"cents\"] > 0 else 1)'" \
    || fail "team a never spent"
run 0 "$FIN" spend --team a --output json
[ "$(jq_ '[t["team"] for t in d["teams"]]')" = "['a']" ] || fail "spend --team a: $(cat "$OUT")"
run 0 "$FIN" spend --team a
grep -Eq '^a +[0-9]+\.[0-9]{2}$' "$OUT" && ! grep -q '^b ' "$OUT" || fail "spend --team a table: $(cat "$OUT")"

# ---- where the token and the URL come from -------------------------------------------------
# A client file holding a token that the group may read is refused, saying how to fix it.
printf 'url: %s\ntoken: %s\n' "$TARMAC_URL" "$VIEW" >"$WORK/client.yaml"
chmod 640 "$WORK/client.yaml"
TARMAC_CLIENT_CONFIG=$WORK/client.yaml run 2 - pools
grep -q 'readable by group or others' "$ERR" && grep -q "chmod 600 $WORK/client.yaml" "$ERR" \
    || fail "group-readable client config: $(cat "$ERR")"
chmod 600 "$WORK/client.yaml"
(unset TARMAC_URL; TARMAC_CLIENT_CONFIG=$WORK/client.yaml run 0 - pools) || exit 1
# The default file, with token_file (which must be private too).
mkdir -p "$HOME/.config/tarmac"
printf '%s\n' "$VIEW" >"$WORK/tok"
chmod 644 "$WORK/tok"
printf 'url: %s\ntoken_file: %s\n' "$TARMAC_URL" "$WORK/tok" >"$HOME/.config/tarmac/client.yaml"
run 2 - pools
grep -q 'token_file .* readable by group or others' "$ERR" || fail "group-readable token_file: $(cat "$ERR")"
chmod 600 "$WORK/tok"
run 0 - pools --output json
[ "$(jq_ 'len(d["items"])')" = 2 ] || fail "token_file: $(cat "$OUT")"
printf 'url: %s\ntokn: x\n' "$TARMAC_URL" >"$HOME/.config/tarmac/client.yaml"
run 2 - pools
grep -q 'client.yaml:2: key "tokn": unrecognized' "$ERR" || fail "unknown client key: $(cat "$ERR")"
rm -f "$HOME/.config/tarmac/client.yaml"
# --config: the server's listen address (port 0 cannot say where it is).
sed "s|^listen: .*|listen: \"0.0.0.0:$PORT\"|" "$WORK/c.yaml" >"$WORK/c2.yaml"
(unset TARMAC_URL; run 0 "$VIEW" pools --config "$WORK/c2.yaml") || exit 1
(unset TARMAC_URL; run 2 "$VIEW" pools --config "$WORK/c.yaml"; grep -q 'port 0' "$ERR") || fail "listen port 0"
# --verbose shows the requests, never the token.
run 0 "$VIEW" jobs --limit 1 --verbose
grep -q "^> GET http://127.0.0.1:$PORT/v1/jobs?limit=1" "$ERR" && grep -q '^< 200 ' "$ERR" || fail "verbose: $(cat "$ERR")"
# Nothing listening: exit 1, a clear message.
run 1 "$VIEW" jobs --url http://127.0.0.1:1
grep -q 'could not reach http://127.0.0.1:1' "$ERR" || fail "unreachable: $(cat "$ERR")"

# ---- https: the server's certificate is verified, a private CA given ---------------------
ossl() { openssl "$@" >>"$WORK/openssl.out" 2>&1 || fail "openssl $1"; }
EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
ossl req -x509 "${EC[@]}" -keyout "$WORK/ca.key" -out "$WORK/ca.pem" -days 2 -subj /CN=tarmac-cli-ca
ossl req "${EC[@]}" -keyout "$WORK/server.key" -out "$WORK/server.csr" -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/san.cnf"
ossl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -out "$WORK/server.pem" -days 2 -extfile "$WORK/san.cnf"
cp "$WORK/c.yaml" "$WORK/tls.yaml"
# A low request rate per token on this one: the CLI waits out its 429s.
printf 'api:\n  tls_cert_file: "%s"\n  tls_key_file: "%s"\n  rate_per_token: 2\n  burst: 2\n' \
    "$WORK/server.pem" "$WORK/server.key" >>"$WORK/tls.yaml"
"$TARMAC" serve --config "$WORK/tls.yaml" >"$WORK/tls.out" 2>"$WORK/tls.log" &
PIDS+=("$!")
wait_for 20 "grep -q 'api listening' '$WORK/tls.log'" || fail "the https API never started"
TPORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/tls.log" | head -n 1)
run 1 "$VIEW" pools --url "https://127.0.0.1:$TPORT"
grep -q "could not reach https://127.0.0.1:$TPORT" "$ERR" && grep -q -- '--cacert' "$ERR" \
    || fail "an unverifiable certificate: $(cat "$ERR")"
run 0 "$VIEW" pools --url "https://127.0.0.1:$TPORT" --cacert "$WORK/ca.pem"
grep -q '^od ' "$OUT" || fail "pools over https: $(cat "$OUT")"
before=$(jobs_in_db)
run 0 "$ENG" submit --team a --gpu-milli 100 --estimate 1m --count 5 --verbose --url "https://127.0.0.1:$TPORT" \
    --cacert "$WORK/ca.pem"
[ "$(jobs_in_db)" = $((before + 5)) ] || fail "submit past the rate: $(( $(jobs_in_db) - before )) of 5 stored"
grep -q '^< 429 ' "$ERR" && grep -q "past the token's rate: again in 1s" "$ERR" || fail "no 429 waited out: $(cat "$ERR")"
(export TARMAC_CA_FILE=$WORK/ca.pem; unset TARMAC_URL
 sed -i "s|^listen: .*|listen: \"127.0.0.1:$TPORT\"|" "$WORK/tls.yaml"
 run 0 "$VIEW" jobs --config "$WORK/tls.yaml" --limit 1 --verbose
 grep -q "^> GET https://127.0.0.1:$TPORT/v1/jobs" "$ERR") || fail "https from the server config's listen"

# ---- the direct-database forms still work ----------------------------------------------------
run 0 - db jobs --config "$WORK/c.yaml" --state cancelled --output json
[ "$(jq_ 'len(d)')" = 1 ] || fail "db jobs: $(cat "$OUT")"
run 0 - db summary --config "$WORK/c.yaml"
run 2 - summary
grep -q 'tarmac db summary' "$ERR" || fail "summary hint: $(cat "$ERR")"

# ---- no token anywhere in what was printed ------------------------------------------------------
for t in "$ADMIN" "$FIN" "$ENG" "$VIEW"; do
    if grep -rqF -- "$t" "$WORK/o" "$WORK/serve.log" "$WORK/serve.out" "$WORK/token.log"; then
        fail "a token was printed: $(grep -rlF -- "$t" "$WORK/o" "$WORK"/*.log)"
    fi
done
n=$(ls "$WORK/o" | grep -c '\.out$')
[ "$n" -gt 50 ] || fail "only $n commands ran"
echo "1 passed, 0 failed ($n commands)"
