#!/usr/bin/env bash
# The database goes away while serving: the controller keeps running,
# retries with backoff, and carries on with the work once it is back.
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
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 2 --runtime 4s --count 2 >/dev/null

proxied="postgresql://postgres@127.0.0.1:$port/itest_db_outage"
"$TARMAC" serve --config "$WORK/c.yaml" --database-url "$proxied" >"$WORK/serve.out" 2>"$WORK/serve.log" &
serve=$!; PIDS+=("$serve")
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'running'"'")" = 2 ]' \
    || fail "jobs never started"

kill -9 "$proxy"                       # the database is gone
sleep 4
kill -0 "$serve" 2>/dev/null || fail "the controller died while the database was away"
grep -q 'database connection lost or refused' "$WORK/serve.log" || fail "the outage was not logged"
start_proxy                            # and back

wait_for 40 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 2 ]' \
    || fail "work did not finish after the database came back: $(psql_q 'SELECT id, state FROM jobs')"
kill -TERM "$serve"
wait "$serve" || fail "unclean stop after the outage"
echo "1 passed, 0 failed"
