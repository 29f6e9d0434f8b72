#!/usr/bin/env bash
# Bad database URLs: a clear message, retried, no crash.
#  - an unreachable host (refused, and one that never answers) before the
#    real one: migrate and serve get through to the real one;
#  - a host list of standbys only (a database that is read-only): serve
#    keeps running and says "read-only" while retrying; migrate retries and
#    succeeds once a primary appears, with a clear message meanwhile.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_ha_bad_db)
dead=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# 192.0.2.1 (TEST-NET-1) never answers; 127.0.0.1:$dead refuses.
multi="postgresql://postgres@192.0.2.1:5432,127.0.0.1:$dead,127.0.0.1:$PGPORT/itest_ha_bad_db?connect_timeout=2"
write_config "$WORK/c.yaml" 2 2s 1s 300ms
sed -i "s|^  url: .*|  url: \"$multi\"|" "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate through a dead host: $(cat "$WORK/migrate.log")"
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 2 --runtime 2s --count 2 >/dev/null
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
serve=$!; PIDS+=("$serve")
wait_for 40 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 2 ]' \
    || fail "serve did not get through the dead hosts: $(psql_q 'SELECT id, state FROM jobs')"
grep -q 'could not connect to database host, trying the next' "$WORK/serve.log" || fail "no message for the dead host"
grep 'trying the next' "$WORK/serve.log" | grep -q 'password' && fail "a message shows a password"
kill -TERM "$serve"; wait "$serve" || fail "unclean stop"
echo "dead hosts among several: ok"

# ---- standbys only ----------------------------------------------------------
psql_q "ALTER DATABASE itest_ha_bad_db SET default_transaction_read_only = on" >/dev/null
ro="postgresql://postgres@127.0.0.1:$PGPORT,localhost:$PGPORT/itest_ha_bad_db"
"$TARMAC" serve --config "$WORK/c.yaml" --database-url "$ro" >"$WORK/ro.out" 2>"$WORK/ro.log" &
serve=$!; PIDS+=("$serve")
sleep 3
kill -0 "$serve" 2>/dev/null || fail "serve died on a read-only host list: $(tail -n 5 "$WORK/ro.log")"
grep -q 'read-only' "$WORK/ro.log" || fail "no clear message for a standby-only list: $(tail -n 5 "$WORK/ro.log")"
grep -q 'became leader' "$WORK/ro.log" && fail "led on a read-only database"
kill -TERM "$serve"; wait "$serve" || true
# migrate retries while no primary exists, and goes on once one does.
( sleep 3; psql -X -q -d "$TM_PG_BASE/postgres" -c "ALTER DATABASE itest_ha_bad_db SET default_transaction_read_only = off" >/dev/null ) &
flip=$!
t0=$(date +%s)
"$TARMAC" migrate --config "$WORK/c.yaml" --database-url "$ro" >/dev/null 2>"$WORK/migrate_ro.log" \
    || fail "migrate did not wait for a primary: $(cat "$WORK/migrate_ro.log")"
wait "$flip"
grep -q 'no primary among the database hosts yet, retrying' "$WORK/migrate_ro.log" \
    || fail "migrate did not say why it waits: $(cat "$WORK/migrate_ro.log")"
[ $(( $(date +%s) - t0 )) -ge 2 ] || fail "migrate did not wait"
echo "standby-only list: serve retries, migrate waits for a primary: ok"
echo "1 passed, 0 failed"
