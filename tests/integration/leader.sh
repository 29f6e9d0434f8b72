#!/usr/bin/env bash
# Two controllers against one database: exactly one reconciles; when it is
# killed (-9), the other takes over within two tick intervals and finishes
# the work.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_leader)
tick_ms=1000
write_config "$WORK/c.yaml" 4 2s 1s "${tick_ms}ms"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/a.out" 2>"$WORK/a.log" &
a=$!; PIDS+=("$a")
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/b.out" 2>"$WORK/b.log" &
b=$!; PIDS+=("$b")

leaders() { grep -l 'became leader' "$WORK/a.log" "$WORK/b.log" 2>/dev/null | wc -l; }
wait_for 15 '[ "$(leaders)" -ge 1 ]' || fail "no controller became leader"
sleep 3
[ "$(leaders)" = 1 ] || fail "both controllers claimed leadership"
if grep -q 'became leader' "$WORK/a.log"; then leader=$a; standby=$b; slog=$WORK/b.log
else leader=$b; standby=$a; slog=$WORK/a.log; fi

"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 4 --runtime 2s --count 4 >/dev/null
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'running'"'")" -ge 1 ]' \
    || fail "the leader placed nothing"
grep -q 'op=place' "$slog" && fail "the standby reconciled while the leader was alive"

t0=$(date +%s%N)
kill -9 "$leader"
wait_for 10 'grep -q "became leader" "$slog"' || fail "the standby never took over"
took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "takeover after ${took_ms} ms (tick ${tick_ms} ms)"
# Two tick intervals, plus the 200 ms granularity of this poll.
[ "$took_ms" -le $(( 2 * tick_ms + 200 )) ] || fail "takeover took ${took_ms} ms, more than two ticks"

wait_for 40 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 4 ]' \
    || fail "the new leader did not finish the work: $(psql_q 'SELECT id, state FROM jobs')"
[ "$(psql_q 'SELECT epoch FROM leader')" -ge 2 ] || fail "epoch did not advance"
kill -TERM "$standby"
wait "$standby" || fail "the standby did not stop cleanly on SIGTERM"
grep -q 'event loop did not close cleanly' "$slog" && fail "loop not closed cleanly"
echo "1 passed, 0 failed"
