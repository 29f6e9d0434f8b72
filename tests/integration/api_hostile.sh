#!/usr/bin/env bash
# The API against hostile and careless clients, through `tarmac
# serve` and curl: each finding of the review is a case here, and every
# refused request changes no row.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_api_hostile)
write_config "$WORK/c.yaml" 0 2s 1s 300ms
printf 'scrape-%s\n' "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$WORK/metrics.token"
chmod 600 "$WORK/metrics.token"
printf 'api:\n  metrics_token_file: "%s"\n' "$WORK/metrics.token" >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
TOKEN=$("$TARMAC" token create --name hostile-admin --role admin --config "$WORK/c.yaml" 2>/dev/null) ||
    fail "token create"
"$TARMAC" token create --name hostile-frozen --role engineer --team frozen --config "$WORK/c.yaml" \
    >/dev/null 2>&1 || fail "token for team frozen"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"

# req METHOD PATH CONTENT_TYPE BODY_FILE_OR_- : prints the status; body in $WORK/out, headers in $WORK/hdr
req() {
    local args=(-sS -o "$WORK/out" -D "$WORK/hdr" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $TOKEN")
    [ -n "$3" ] && args+=(-H "Content-Type: $3")
    [ "$4" != - ] && args+=(--data-binary "@$4")
    curl "${args[@]}" "$BASE$2"
}
body() { printf '%b' "$1" >"$WORK/body"; echo "$WORK/body"; }
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("field"))' "$WORK/out"; }
rows() { psql_q "SELECT (SELECT count(*) FROM jobs) || '/' || (SELECT count(*) FROM budgets) || '/' ||
                 (SELECT coalesce(string_agg(scope || ':' || cap_cents, ',' ORDER BY scope), '') FROM budgets)"; }
expect() { # STATUS FIELD WHAT -- after req; and nothing changed
    local got=$1 want=$2 wfield=$3 what=$4 f
    [ "$got" = "$want" ] || fail "$what: status $got, expected $want: $(cat "$WORK/out")"
    grep -qi '^content-type: application/json' "$WORK/hdr" || fail "$what: the answer is not JSON"
    f=$(field)
    [ "$f" = "$wfield" ] || fail "$what: field $f, expected $wfield: $(cat "$WORK/out")"
    [ "$(rows)" = "$before" ] || fail "$what: a refused request changed rows ($before -> $(rows))"
}

code=$(req PUT /v1/budgets/frozen application/json "$(body '{"cap_cents":0,"period":"month","hard":true,"warn_percent":80}')")
[ "$code" = 200 ] || fail "budget for frozen: $code $(cat "$WORK/out")"
code=$(req POST /v1/jobs application/json "$(body '{"team":"ok","gpus":1}')")
[ "$code" = 201 ] || fail "a plain submit: $code $(cat "$WORK/out")"
before=$(rows)

# A NUL cuts nothing: escaped, raw, in a key, in a path, in a query.
expect "$(req POST /v1/jobs application/json "$(body '{"team":"fro\\u0000zen","gpus":1}')")" 400 team "escaped NUL in team"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"fro\x00zen","gpus":1}')")" 400 body "raw NUL in team"
expect "$(req POST /v1/jobs/1/cancel application/json "$(body '{"reason":"a\\u0000b"}')")" 400 reason "NUL in a reason"
expect "$(req PUT /v1/budgets/frozen%00anything application/json "$(body '{"cap_cents":999,"period":"month","hard":false,"warn_percent":80}')")" 400 name "NUL in a budget path"
expect "$(req GET '/v1/jobs?team=fro%00zen' '' -)" 400 team "NUL in a query value"
# Bytes that are not UTF-8 are the client's error, not the database's.
expect "$(req POST /v1/jobs application/json "$(body '{"team":"fro\xffzen","gpus":1}')")" 400 body "0xff in team"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"name":"\xc0\xaf"}')")" 400 body "overlong UTF-8"
expect "$(req GET '/v1/jobs?team=%ff' '' -)" 400 query "0xff in a query value"
# The JSON reader is strict.
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":01}')")" 400 body "leading zero"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"name":"a\nb"}')")" 400 body "raw newline in a string"
expect "$(req POST /v1/jobs application/json "$(body '\xef\xbb\xbf{"team":"x","gpus":1}')")" 400 body "byte-order mark"
# A body is JSON and says so.
expect "$(req POST /v1/jobs text/plain "$(body '{"team":"x","gpus":1}')")" 415 Content-Type "text/plain body"
expect "$(req POST /v1/jobs application/x-www-form-urlencoded "$(body '{"team":"x","gpus":1}')")" 415 Content-Type "form body"
expect "$(req POST /v1/jobs '' "$(body '{"team":"x","gpus":1}')")" 415 Content-Type "body without a Content-Type"
expect "$(req POST /v1/jobs 'application/json; charset=latin1' "$(body '{"team":"x","gpus":1}')")" 415 Content-Type "latin1 charset"
code=$(req POST /v1/jobs 'Application/JSON; charset=UTF-8' "$(body '{"team":"ok","gpus":1}')")
[ "$code" = 201 ] || fail "application/json with charset=UTF-8 refused: $code $(cat "$WORK/out")"
before=$(rows)
# One answer for a body too large, whatever its size: 1 MB just past the
# limit and 8 MB far past the point where h2o refuses to read it.
for mb in 1 8; do
    python3 -c "import sys; sys.stdout.write('{\"team\":\"x\",\"gpus\":1,\"name\":\"' + 'a' * ($mb << 20) + '\"}')" >"$WORK/big"
    expect "$(req POST /v1/jobs application/json "$WORK/big")" 400 body "a body of $mb MB"
    # Chunked, the server learns the size only while reading: it answers
    # and closes while curl may still be sending, and curl may then report
    # the reset (exit 55) with the interim 100 as its code.  What matters is
    # the answer it did read: the JSON error naming body.
    curl -sS -o "$WORK/out" -w '%{http_code}' -X POST -H "Authorization: Bearer $TOKEN" \
        -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary "@$WORK/big" \
        "$BASE/v1/jobs" >"$WORK/code" 2>/dev/null || true
    case "$(cat "$WORK/code")" in 400 | 100) ;; *) fail "a chunked body of $mb MB: status $(cat "$WORK/code")" ;; esac
    [ "$(field)" = body ] || fail "a chunked body of $mb MB: $(head -c 200 "$WORK/out")"
    grep -q 'request body larger than' "$WORK/out" || fail "a chunked body of $mb MB: $(head -c 200 "$WORK/out")"
done
# One of gpus or gpu_milli.
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"gpu_milli":1000}')")" 400 gpu_milli "gpus with gpu_milli"
# A job no configured pool could ever hold is refused with the reason.
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":12}')")" 400 gpus "more GPUs than any node"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"cpu_milli":200000}')")" 400 cpu_milli "more CPU than any type"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"gpu_model":"H100"}')")" 400 gpu_model "a model no pool has"
expect "$(req POST /v1/jobs application/json "$(body '{"team":"x","gpus":1,"pool":"nope"}')")" 400 pool "a pool that does not exist"
grep -q 'no configured pool can ever hold this job' "$WORK/out" || grep -q 'no pool is named' "$WORK/out" ||
    fail "the refusal does not say why: $(cat "$WORK/out")"
# A path parameter that is not one is named; an unknown path is 404; a
# known path with another method is 405 with Allow.
expect "$(req GET /v1/jobs/abc '' -)" 400 id "a job id that is not a number"
expect "$(req PUT /v1/budgets/-bad application/json "$(body '{"cap_cents":1,"period":"month","hard":true,"warn_percent":80}')")" 400 name "a budget name outside the pattern"
# h2o resolves "../" before routing: the path is another, unknown one.
expect "$(req PUT /v1/budgets/..%2F..%2Fetc application/json "$(body '{"cap_cents":1,"period":"month","hard":true,"warn_percent":80}')")" 404 None "path trick in a budget name"
expect "$(req GET /v1/nothing '' -)" 404 None "unknown path"
expect "$(req DELETE /v1/jobs '' -)" 405 None "DELETE on /v1/jobs"
allow=$(tr -d '\r' <"$WORK/hdr" | sed -n 's/^[Aa]llow: //p' | tr -d ' ' | tr ',' '\n' | sort | paste -sd,)
[ "$allow" = "GET,HEAD,POST" ] || fail "405 Allow header lists \"$allow\""

# /metrics needs the scrape token once api.metrics_token_file is set.
code=$(curl -sS -o "$WORK/out" -w '%{http_code}' "$BASE/metrics")
[ "$code" = 401 ] || fail "/metrics without the token: $code"
code=$(curl -sS -o "$WORK/out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "$BASE/metrics")
[ "$code" = 401 ] || fail "/metrics with an API token instead of the scrape token: $code"
code=$(curl -sS -o "$WORK/out" -w '%{http_code}' -H "Authorization: Bearer $(cat "$WORK/metrics.token")" "$BASE/metrics")
[ "$code" = 200 ] || fail "/metrics with the scrape token: $code"
grep -q '^tarmac_spend_cents' "$WORK/out" || grep -q '^tarmac_' "$WORK/out" || fail "/metrics answered no metrics"
grep -q "$(cat "$WORK/metrics.token")" "$WORK/serve.log" && fail "the scrape token is in the log"
grep -q "$TOKEN" "$WORK/serve.log" && fail "the API token is in the log"
echo "api_hostile: every hostile case refused, with its field, and nothing changed"
