#!/usr/bin/env bash
# Fast answers while the database is away, and idempotent submission.
#  - POST /v1/jobs with an Idempotency-Key: a retry gets the first answer
#    (same id, Idempotent-Replayed) and creates nothing; another body under
#    the same key is 422 naming the header.
#  - The database hangs (its proxy stopped: packets accepted, never
#    answered) and then is refused (proxy killed): POST and GET /v1/jobs
#    and /metrics answer 503 with Retry-After and a JSON error within
#    api.request_timeout, never a hang; a submission answered 503 is not
#    committed when the database returns.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_ha_api_outage)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_proxy() {
    python3 "$TM_SOURCE_DIR/tests/lib/tcp_proxy.py" "$port" 127.0.0.1 "$PGPORT" >"$WORK/proxy.out" 2>&1 &
    proxy=$!; PIDS+=("$proxy")
    wait_for 10 'grep -q ready "$WORK/proxy.out"' || fail "proxy did not start"
}
start_proxy
write_config "$WORK/c.yaml" 2 30s 1s 300ms
cat >>"$WORK/c.yaml" <<YAML
api:
  request_timeout: 1500ms
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
ENG=$("$TARMAC" token create --config "$WORK/c.yaml" --name ha-eng --role engineer --team a 2>/dev/null)
ENG2=$("$TARMAC" token create --config "$WORK/c.yaml" --name ha-eng2 --role engineer --team a 2>/dev/null)
proxied="postgresql://postgres@127.0.0.1:$port/itest_ha_api_outage"
"$TARMAC" serve --config "$WORK/c.yaml" --database-url "$proxied" >"$WORK/serve.out" 2>"$WORK/serve.log" &
serve=$!; PIDS+=("$serve")
wait_for 20 "grep -q 'api listening' '$WORK/serve.log'" || fail "the API never started"
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
URL=http://127.0.0.1:$PORT
body='{"team":"a","gpus":1}'
# post TOKEN BODY [KEY]: prints "STATUS TIME_S" and leaves headers and body in $WORK/h, $WORK/b
post() {
    curl -sS -o "$WORK/b" -D "$WORK/h" -w '%{http_code} %{time_total}' --max-time 10 \
        -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
        ${3:+-H "Idempotency-Key: $3"} -d "$2" "$URL/v1/jobs" || echo "000 99"
}
jobs() { psql_q "SELECT count(*) FROM jobs"; }

# ---- idempotency -----------------------------------------------------------
read -r st _ <<<"$(post "$ENG" "$body" k-1)"
[ "$st" = 201 ] || fail "keyed submit: $st $(cat "$WORK/b")"
id1=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$WORK/b")
first=$(cat "$WORK/b")
read -r st _ <<<"$(post "$ENG" "$body" k-1)"
[ "$st" = 201 ] || fail "replayed submit: $st $(cat "$WORK/b")"
[ "$(cat "$WORK/b")" = "$first" ] || fail "the replay is not the first answer: $(cat "$WORK/b")"
grep -qi '^idempotent-replayed: true' "$WORK/h" || fail "no Idempotent-Replayed header"
[ "$(jobs)" = 1 ] || fail "a replay created a job: $(jobs)"
read -r st _ <<<"$(post "$ENG" '{"team":"a","gpus":2}' k-1)"
[ "$st" = 422 ] || fail "another body under the same key: $st"
grep -q '"field":"Idempotency-Key"' "$WORK/b" || fail "422 does not name the header: $(cat "$WORK/b")"
read -r st _ <<<"$(post "$ENG2" "$body" k-1)"
[ "$st" = 201 ] || fail "the same key from another token: $st"
[ "$(jobs)" = 2 ] || fail "another token's key is its own: $(jobs) jobs"
read -r st _ <<<"$(post "$ENG" "$body" 'bad key')"
[ "$st" = 400 ] && grep -q Idempotency-Key "$WORK/b" || fail "a key with a space: $st $(cat "$WORK/b")"
# Concurrent requests under one key: one job.
racers=()
for i in 1 2 3 4 5 6; do post "$ENG" "$body" k-race >"$WORK/race.$i" & racers+=("$!"); done
wait "${racers[@]}"
[ "$(psql_q "SELECT count(*) FROM api_idempotency WHERE key = 'k-race'")" = 1 ] || fail "race: keys"
[ "$(jobs)" = 3 ] || fail "concurrent requests under one key made $(jobs) jobs, not 3"
cat "$WORK"/race.* | grep -qv '^201' && fail "a racing request was not answered 201: $(cat "$WORK"/race.*)"
echo "idempotency: replay, 422, per token, race: ok"

# ---- the database hangs ----------------------------------------------------
check_503() { # check_503 WHAT STATUS TIME
    [ "$2" = 503 ] || fail "$1 while the database is away: $2 $(cat "$WORK/b")"
    python3 -c "import sys; sys.exit(0 if float('$3') < 3.0 else 1)" || fail "$1 took $3 s"
    grep -qi '^retry-after: ' "$WORK/h" || fail "$1: no Retry-After"
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["error"]' "$WORK/b" \
        || fail "$1: not a JSON error: $(cat "$WORK/b")"
    echo "$1 while the database is away: $2 in $3 s"
}
before=$(jobs)
kill -STOP "$proxy"
read -r st t <<<"$(post "$ENG" "$body")"; check_503 "POST /v1/jobs (hung)" "$st" "$t"
read -r st t <<<"$(post "$ENG" "$body" k-hung)"; check_503 "keyed POST (hung)" "$st" "$t"
read -r st t <<<"$(curl -sS -o "$WORK/b" -D "$WORK/h" -w '%{http_code} %{time_total}' --max-time 10 \
    -H "Authorization: Bearer $ENG" "$URL/v1/jobs")"; check_503 "GET /v1/jobs (hung)" "$st" "$t"
read -r st t <<<"$(curl -sS -o "$WORK/b" -D "$WORK/h" -w '%{http_code} %{time_total}' --max-time 10 \
    "$URL/metrics")"; check_503 "GET /metrics (hung)" "$st" "$t"
kill -CONT "$proxy"
sleep 3
[ "$(jobs)" = "$before" ] || fail "a submission answered 503 was committed later: $(jobs) jobs, $before before"

# ---- the database refuses ---------------------------------------------------
kill -9 "$proxy"; wait "$proxy" 2>/dev/null || true
read -r st t <<<"$(post "$ENG" "$body")"; check_503 "POST /v1/jobs (refused)" "$st" "$t"
read -r st t <<<"$(curl -sS -o "$WORK/b" -D "$WORK/h" -w '%{http_code} %{time_total}' --max-time 10 \
    "$URL/metrics")"; check_503 "GET /metrics (refused)" "$st" "$t"
start_proxy
sleep 2
[ "$(jobs)" = "$before" ] || fail "a submission answered 503 was committed later: $(jobs) jobs"
wait_for 20 '[ "$(post "$ENG" "$body" k-back | cut -c1-3)" = 201 ]' || fail "no 201 once the database is back"
# ---- the CLI retries through an outage with one key ---------------------------
before=$(jobs)
kill -STOP "$proxy"
( sleep 4; kill -CONT "$proxy" ) & cont=$!
HOME=$WORK TARMAC_URL=$URL TARMAC_TOKEN=$ENG "$TARMAC" submit --team a --gpus 1 --count 2 \
    >"$WORK/cli.out" 2>"$WORK/cli.err" || fail "the CLI gave up during the outage: $(cat "$WORK/cli.err")"
wait "$cont"
grep -q 'again in .* with the same Idempotency-Key' "$WORK/cli.err" || fail "the CLI did not retry: $(cat "$WORK/cli.err")"
sleep 2
[ "$(jobs)" = $((before + 2)) ] || fail "the CLI's retries queued $(( $(jobs) - before )) jobs, not 2"
echo "CLI through a 4 s outage: 2 jobs, retried with its keys"
kill -0 "$serve" || fail "serve died"
kill -TERM "$serve"; wait "$serve" || fail "unclean stop"
echo "1 passed, 0 failed"
