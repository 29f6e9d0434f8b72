#!/usr/bin/env bash
# A leader that stops (SIGSTOP) keeps its advisory lock but stops renewing
# its lease: a standby ends its session and takes over within the lease plus
# two ticks; once the old one is continued (SIGCONT) it applies nothing (the
# epoch fence) and stands by.  HA_ROUNDS=5 repeats it and prints the median
# takeover time (the figure of docs/ha.md).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_ha_lease)
tick_ms=300
lease_ms=1000
rounds=${HA_ROUNDS:-1}
write_config "$WORK/c.yaml" 4 2s 1s "${tick_ms}ms"
sed -i 's/^  pool_size: 3$/  pool_size: 3\n  leader_lease: '"${lease_ms}"'ms/' "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null

start() { # start NAME
    "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/$1.out" 2>>"$WORK/$1.log" &
    PIDS+=("$!"); eval "pid_$1=$!"
}
start a; start b
leader_of() { # prints a or b: the holder of the current epoch, by pid
    local holder; holder=$(psql_q "SELECT holder FROM leader_lease")
    if [ "${holder##*:}" = "$pid_a" ]; then echo a; elif [ "${holder##*:}" = "$pid_b" ]; then echo b; fi
}
wait_for 15 '[ -n "$(leader_of)" ]' || fail "no controller became leader"
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 4 --runtime 8s --count 4 >/dev/null

times=()
for round in $(seq 1 "$rounds"); do
    old=$(leader_of); [ "$old" = a ] && new=b || new=a
    eval "op=\$pid_$old"
    epoch=$(psql_q "SELECT epoch FROM leader")
    wait_for 10 '[ "$(psql_q "SELECT renewed_at > now() - interval '"'1 second'"' FROM leader_lease")" = t ]' \
        || fail "the leader does not renew its lease"
    became=$(grep -c 'became leader' "$WORK/$new.log" || true)
    t0=$(date +%s%N)
    kill -STOP "$op"
    # The successor's first tick as leader starts with "became leader".
    wait_for 20 '[ "$(grep -c "became leader" "$WORK/$new.log")" -gt "$became" ]' \
        || fail "round $round: nobody took over from the stopped leader"
    took_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    times+=("$took_ms")
    echo "round $round: SIGSTOP of the leader to the successor's first tick: ${took_ms} ms (lease ${lease_ms} ms, tick ${tick_ms} ms)"
    bound=$(( lease_ms + 3 * tick_ms + 1500 ))
    [ "$took_ms" -le "$bound" ] || fail "takeover took ${took_ms} ms, more than ${bound} ms"
    grep -q 'leader lease expired: ended the silent leader' "$WORK/$new.log" \
        || fail "the successor did not say it broke the lease"
    lines=$(wc -l <"$WORK/$old.log")
    kill -CONT "$op"
    new_epoch=$(psql_q "SELECT epoch FROM leader")
    sleep 2
    kill -0 "$op" 2>/dev/null || fail "the continued leader died"
    [ "$(psql_q "SELECT epoch FROM leader")" = "$new_epoch" ] || fail "leadership moved again after SIGCONT"
    [ "$(leader_of)" = "$new" ] || fail "the continued leader took the lease back"
    after=$(tail -n +"$((lines + 1))" "$WORK/$old.log")
    echo "$after" | grep -q 'leadership lost' || fail "the continued leader did not notice it lost"
    echo "$after" | grep -q ' op=' && fail "the continued leader applied a plan: $after"
    true
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(echo "$sorted" | sed -n "$(( (rounds + 1) / 2 ))p")
echo "takeover after SIGSTOP: median ${median} ms of ${rounds} (all: $(echo $sorted))"
wait_for 60 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 4 ]' \
    || fail "the work did not finish: $(psql_q 'SELECT id, state FROM jobs')"
echo "1 passed, 0 failed"
