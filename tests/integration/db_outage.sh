#!/usr/bin/env bash
# The database goes away while serving: the controller keeps running,
# retries with backoff, and carries on with the work once it is back.
# While the pool knows it is gone, data routes answer 503 at once and
# /readyz says not ready; a hung database (SIGSTOP) is not ready either.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_db_outage)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_proxy() {
    python3 "$TM_SOURCE_DIR/tests/lib/tcp_proxy.py" "$port" 127.0.0.1 "$PGPORT" >"$WORK/proxy.out" 2>&1 &
    proxy=$!; PIDS+=("$proxy")
    wait_for 10 'grep -q ready "$WORK/proxy.out"' || fail "proxy did not start"
}
start_proxy
write_config "$WORK/c.yaml" 2 2s 1s 300ms
# A long request deadline, so that an answer that waited for it cannot
# pass for one given at once.
printf 'api:\n  request_timeout: 20s\n' >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name o-admin --role admin 2>>"$WORK/token.log") \
    || fail "token create"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 2 --runtime 4s --count 2 >/dev/null

proxied="postgresql://postgres@127.0.0.1:$port/itest_db_outage"
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" --database-url "$proxied" \
    >"$WORK/serve.out" 2>"$WORK/serve.log" &
serve=$!; PIDS+=("$serve")
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'running'"'")" = 2 ]' \
    || fail "jobs never started"

kill -9 "$proxy"                       # the database is gone
sleep 4
kill -0 "$serve" 2>/dev/null || fail "the controller died while the database was away"
grep -q 'database connection lost or refused' "$WORK/serve.log" || fail "the outage was not logged"
# The pool knows the database is gone: a data route answers 503 with
# Retry-After at once, not after api.request_timeout (20 s here); /readyz
# says not ready.
START=$(date +%s%3N)
CODE=$(curl -sS -o "$WORK/down.json" -D "$WORK/down.h" -w '%{http_code}' -m 30 \
    -H "Authorization: Bearer $ADMIN" "$BASE/v1/jobs") || fail "curl during the outage"
TOOK=$(( $(date +%s%3N) - START ))
[ "$CODE" = 503 ] && grep -qi '^retry-after:' "$WORK/down.h" \
    || fail "a data route during the outage answered $CODE: $(cat "$WORK/down.h" "$WORK/down.json")"
[ "$TOOK" -lt 10000 ] || fail "the 503 took $TOOK ms: it waited for api.request_timeout"
echo "the outage's 503 came in $TOOK ms (api.request_timeout 20 s)"
[ "$(curl -s -o /dev/null -w '%{http_code}' -m 30 "$BASE/readyz")" = 503 ] || fail "/readyz ready during the outage"
start_proxy                            # and back

wait_for 40 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 2 ]' \
    || fail "work did not finish after the database came back: $(psql_q 'SELECT id, state FROM jobs')"

# A hung database (its backends stopped, connections open, nothing
# answered): /readyz must make a real round trip and say not ready
# within its own short bound, well before api.request_timeout.
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "/readyz not ready after the outage"
BACKENDS=$(psql_q "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity
                   WHERE datname = current_database() AND pid <> pg_backend_pid()
                     AND backend_type = 'client backend'")
[ -n "$BACKENDS" ] || fail "no backend of serve's to stop"
# shellcheck disable=SC2086
kill -STOP $BACKENDS
START=$(date +%s%3N)
CODE=$(curl -s -o /dev/null -w '%{http_code}' -m 30 "$BASE/readyz")
TOOK=$(( $(date +%s%3N) - START ))
# shellcheck disable=SC2086
kill -CONT $BACKENDS
[ "$CODE" = 503 ] || fail "/readyz answered $CODE while the database was stopped"
[ "$TOOK" -lt 10000 ] || fail "/readyz took $TOOK ms while the database was stopped"
echo "/readyz said not ready in $TOOK ms with the database stopped"
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "/readyz not ready once the database went on"
kill -TERM "$serve"
wait "$serve" || fail "unclean stop after the outage"
echo "1 passed, 0 failed"
