#!/usr/bin/env bash
# `tarmac serve` with api.tls_cert_file/tls_key_file serves HTTPS only
# (HTTP/1.1 and HTTP/2 by ALPN) with a certificate from a throwaway CA made
# here; a bad certificate or key stops serve before anything listens,
# naming the file and never showing the key.  Then the configured limits
# (api.max_body_bytes, max_list, rate_per_token, burst) on a plain serve.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_api_tls)
write_config "$WORK/c.yaml" 2 2s 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
token() { "$TARMAC" token create --name "$1" --role admin --config "$WORK/c.yaml" 2>>"$WORK/token.log"; }
ADMIN=$(token tls-admin) || fail "token create"

# A CA, a server certificate for 127.0.0.1 (IP SAN) signed by it, and a key
# that belongs to no certificate.
ossl() { openssl "$@" >>"$WORK/openssl.out" 2>&1 || fail "openssl $1"; }
EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
ossl req -x509 "${EC[@]}" -keyout "$WORK/ca.key" -out "$WORK/ca.pem" -days 2 -subj /CN=tarmac-itest-ca
ossl req "${EC[@]}" -keyout "$WORK/server.key" -out "$WORK/server.csr" -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1\n' >"$WORK/san.cnf"
ossl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial \
    -out "$WORK/server.pem" -days 2 -extfile "$WORK/san.cnf"
ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:prime256v1 -out "$WORK/other.key"
ossl pkey -in "$WORK/server.key" -aes256 -passout pass:itest-passphrase -out "$WORK/encrypted.key"
printf 'this is not a PEM file\n' >"$WORK/junk.pem"

# with_api FILE CERT KEY: the base config plus an api section.
with_api() {
    cp "$WORK/c.yaml" "$1"
    printf 'api:\n  tls_cert_file: "%s"\n  tls_key_file: "%s"\n' "$2" "$3" >>"$1"
}

# No log line may carry key material: the body lines of every key made here.
no_keys_in() {
    local k
    grep -q 'PRIVATE KEY' "$@" && fail "a private key was logged in $*"
    for k in server other ca encrypted; do
        awk '!/-----/ && length >= 16' "$WORK/$k.key" | grep -qF -f - "$@" && fail "$k.key was logged in $*"
    done
    return 0
}

# serve_start CONFIG NAME: serve on a free port; sets SERVE and PORT.
serve_start() {
    TARMAC_LISTEN=127.0.0.1:0 TARMAC_DATABASE_URL=$DB "$TARMAC" serve --config "$1" \
        >"$WORK/$2.out" 2>"$WORK/$2.log" &
    SERVE=$!
    PIDS+=("$SERVE")
    wait_for 20 "grep -q 'api listening' '$WORK/$2.log'" || fail "$2: the API never listened"
    PORT=$(sed -n 's/.*msg="api listening".* port=\([0-9]*\).*/\1/p' "$WORK/$2.log" | head -n 1)
    [ -n "$PORT" ] || fail "$2: no port in the log"
}

# ---- HTTPS ----------------------------------------------------------------
with_api "$WORK/tls.yaml" "$WORK/server.pem" "$WORK/server.key"
serve_start "$WORK/tls.yaml" tls
grep -q 'scheme=https' "$WORK/tls.log" || fail "the API does not say it serves https"
BASE=https://127.0.0.1:$PORT
CURL=(curl -sS --cacert "$WORK/ca.pem")
wait_for 20 "${CURL[*]} -f -o /dev/null $BASE/readyz 2>/dev/null" || fail "never ready over TLS"
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$BASE/healthz") || fail "healthz over TLS"
[ "$code" = 200 ] || fail "healthz over TLS: $code"
code=$("${CURL[@]}" --http1.1 --tlsv1.2 --tls-max 1.2 -o /dev/null -w '%{http_code} %{http_version}' \
    "$BASE/healthz") || fail "TLS 1.2 with HTTP/1.1 refused"
[ "$code" = "200 1.1" ] || fail "TLS 1.2, HTTP/1.1: $code"
# Six jobs over TLS (the list limit below needs more than five).
for i in 1 2 3 4 5 6; do
    code=$("${CURL[@]}" -o "$WORK/job.json" -w '%{http_code}' -X POST "$BASE/v1/jobs" \
        -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
        -d '{"team":"a","gpus":1,"class":"eval","runtime_estimate_s":60}') || fail "submit over TLS"
    [ "$code" = 201 ] || fail "submit over TLS: $code $(cat "$WORK/job.json")"
done
[ "$(psql_q "SELECT count(*) FROM jobs WHERE team = 'a'")" = 6 ] || fail "jobs submitted over TLS not stored"
if curl -V | grep -qw HTTP2; then
    code=$("${CURL[@]}" --http2 -o "$WORK/jobs.json" -w '%{http_code} %{http_version}' \
        -H "Authorization: Bearer $ADMIN" "$BASE/v1/jobs?limit=2") || fail "HTTP/2 over TLS"
    [ "$code" = "200 2" ] || fail "HTTP/2 over TLS: $code"
    python3 -c 'import json, sys; assert len(json.load(open(sys.argv[1]))["items"]) == 2' "$WORK/jobs.json" \
        || fail "HTTP/2 list: $(cat "$WORK/jobs.json")"
else
    echo "note: this curl has no HTTP/2; ALPN h2 not checked"
fi
# Without the CA the certificate does not verify (curl: 60).
rc=0
curl -sS -o /dev/null "$BASE/healthz" 2>"$WORK/noca.err" || rc=$?
[ "$rc" = 60 ] || fail "curl without the CA exited $rc, not 60 (certificate not verified): $(cat "$WORK/noca.err")"
# Plain HTTP to the TLS port gets no HTTP answer.
rc=0
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/healthz" 2>/dev/null) || rc=$?
[ "$rc" != 0 ] && [ "$code" = 000 ] || fail "plain HTTP to the TLS port: exit $rc, status $code"
# Shutdown with a connection still in its handshake (raw TCP, nothing sent)
# must still be clean.
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
exec 3>&-
no_keys_in "$WORK/tls.log" "$WORK/tls.out"
grep -qF "$ADMIN" "$WORK/tls.log" "$WORK/tls.out" && fail "the token was logged"

# ---- refused at start -----------------------------------------------------
# refused NAME CERT KEY KEYNAME FILE: serve exits 1 before listening,
# its error naming KEYNAME and FILE.
refused() {
    local rc=0
    with_api "$WORK/$1.yaml" "$2" "$3"
    TARMAC_LISTEN=127.0.0.1:0 TARMAC_DATABASE_URL=$DB timeout 60 "$TARMAC" serve --config "$WORK/$1.yaml" \
        >"$WORK/$1.out" 2>"$WORK/$1.log" || rc=$?
    [ "$rc" = 1 ] || fail "$1: serve exited $rc, not 1"
    grep -qF "$4: $5: " "$WORK/$1.log" || fail "$1: the error does not name $4 and $5"
    grep -q 'api listening' "$WORK/$1.log" && fail "$1: the API listened"
    no_keys_in "$WORK/$1.log" "$WORK/$1.out"
}
refused mismatch "$WORK/server.pem" "$WORK/other.key" api.tls_key_file "$WORK/other.key"
grep -q 'does not match the certificate' "$WORK/mismatch.log" || fail "mismatch: reason not given"
refused nocert "$WORK/missing.pem" "$WORK/server.key" api.tls_cert_file "$WORK/missing.pem"
grep -q 'No such file or directory' "$WORK/nocert.log" || fail "missing file: reason not given"
refused junkcert "$WORK/junk.pem" "$WORK/server.key" api.tls_cert_file "$WORK/junk.pem"
refused junkkey "$WORK/server.pem" "$WORK/junk.pem" api.tls_key_file "$WORK/junk.pem"
# An encrypted key: serve has no one to ask for the passphrase.
refused encrypted "$WORK/server.pem" "$WORK/encrypted.key" api.tls_key_file "$WORK/encrypted.key"
grep -q 'not an unencrypted PEM private key' "$WORK/encrypted.log" || fail "encrypted key: reason not given"
# The key given as the certificate: refused without echoing it.
refused keyascert "$WORK/server.key" "$WORK/server.key" api.tls_cert_file "$WORK/server.key"

# ---- limits ---------------------------------------------------------------
cp "$WORK/c.yaml" "$WORK/limits.yaml"
printf 'api:\n  max_body_bytes: 1024\n  max_list: 5\n  rate_per_token: 0.25\n  burst: 3\n' >>"$WORK/limits.yaml"
# One token per check: each authenticated request spends one of a token's
# three.
T_BODY=$(token lim-body) && T_LIST=$(token lim-list) && T_RATE=$(token lim-rate) || fail "token create"
serve_start "$WORK/limits.yaml" limits
grep -q 'scheme=http ' "$WORK/limits.log" || fail "a serve without a certificate is not plain HTTP"
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS -o /dev/null $BASE/readyz 2>/dev/null" || fail "limits serve never ready"
job='{"team":"a","gpus":1,"class":"eval","runtime_estimate_s":60}'
pad() { python3 -c 'import sys; j = sys.argv[1]; print(j + " " * (int(sys.argv[2]) - len(j)), end="")' "$job" "$1"; }
pad 2048 >"$WORK/big.json"
pad 1000 >"$WORK/fits.json"
code=$(curl -sS -o "$WORK/big.out" -w '%{http_code}' -X POST "$BASE/v1/jobs" -H "Authorization: Bearer $T_BODY" \
    -H 'Content-Type: application/json' --data-binary @"$WORK/big.json")
[ "$code" = 400 ] || fail "2 KiB body: $code"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["field"] == "body"' "$WORK/big.out" \
    || fail "2 KiB body: $(cat "$WORK/big.out")"
code=$(curl -sS -o "$WORK/fits.out" -w '%{http_code}' -X POST "$BASE/v1/jobs" -H "Authorization: Bearer $T_BODY" \
    -H 'Content-Type: application/json' --data-binary @"$WORK/fits.json")
[ "$code" = 201 ] || fail "1000-byte body under a 1024 limit: $code $(cat "$WORK/fits.out")"
# Lists: the default page is cut to max_list; asking for more is bad input
# naming "limit" (docs/openapi.yaml), asking for max_list is fine.
items() { python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$1"; }
code=$(curl -sS -o "$WORK/list.json" -w '%{http_code}' -H "Authorization: Bearer $T_LIST" "$BASE/v1/jobs")
[ "$code" = 200 ] && [ "$(items "$WORK/list.json")" = 5 ] || fail "default page: $code $(cat "$WORK/list.json")"
code=$(curl -sS -o "$WORK/list.json" -w '%{http_code}' -H "Authorization: Bearer $T_LIST" "$BASE/v1/jobs?limit=50")
[ "$code" = 400 ] || fail "limit=50 over max_list 5: $code"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["field"] == "limit"' "$WORK/list.json" \
    || fail "limit=50: $(cat "$WORK/list.json")"
code=$(curl -sS -o "$WORK/list.json" -w '%{http_code}' -H "Authorization: Bearer $T_LIST" "$BASE/v1/jobs?limit=5")
[ "$code" = 200 ] && [ "$(items "$WORK/list.json")" = 5 ] || fail "limit=5: $code"
# Rate: four requests on one connection, well inside the 4 s one token
# takes to come back (slow enough for a loaded sanitizer run): the bucket
# holds three, so the fourth is refused; after a wait it has refilled.
codes=$(curl -sS -w '%{http_code}\n' -o "$WORK/rate_#1.json" -H "Authorization: Bearer $T_RATE" \
    "$BASE/v1/jobs?limit=[1-4]" | tr '\n' ' ')
[ "$codes" = "200 200 200 429 " ] || fail "rate 0.25/s burst 3, four requests: $codes"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["field"] == "Authorization"' "$WORK/rate_4.json" \
    || fail "429 body: $(cat "$WORK/rate_4.json")"
sleep 4.5
code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $T_RATE" "$BASE/v1/jobs?limit=1")
[ "$code" = 200 ] || fail "after the bucket refilled: $code"
kill -TERM "$SERVE"
wait "$SERVE" || fail "limits serve exited $? after SIGTERM"
echo "1 passed, 0 failed"
