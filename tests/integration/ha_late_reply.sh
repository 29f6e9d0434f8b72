#!/usr/bin/env bash
# The database commits a plan even when the leader that sent it stalls
# before acting on the reply (SIGSTOP there is a race ha_lease.sh hits now
# and then; TARMAC_STALL_POINT=apply_reply makes it certain).  The stall
# outlasts the lease, a standby takes over and carries out the committed
# rows; the stalled one, back, must not make the plan's cloud calls or log
# its decisions: it says the reply came late and stands by.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_ha_late_reply)
tick_ms=300
lease_ms=1000
write_config "$WORK/c.yaml" 4 2s 1s "${tick_ms}ms"
sed -i 's/^  pool_size: 3$/  pool_size: 3\n  leader_lease: '"${lease_ms}"'ms/' "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 4 --runtime 3s --count 4 >/dev/null

# a leads alone first; its first plan (the four jobs' nodes) stalls 2.5 s
# after the commit.
TARMAC_STALL_POINT=apply_reply TARMAC_STALL_MS=2500 \
    "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/a.out" 2>>"$WORK/a.log" &
pid_a=$!; PIDS+=("$pid_a")
wait_for 15 'grep -q "stall point reached" "$WORK/a.log"' || fail "a never reached the stall point"
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/b.out" 2>>"$WORK/b.log" &
pid_b=$!; PIDS+=("$pid_b")
wait_for 20 'grep -q "became leader" "$WORK/b.log"' || fail "b did not take over from the stalled leader"
wait_for 20 'sed -n "/stall point reached/,\$p" "$WORK/a.log" | grep -q "leadership lost"' \
    || fail "a did not notice it lost: $(tail -5 "$WORK/a.log")"
sleep 1
after=$(sed -n '/stall point reached/,$p' "$WORK/a.log")
echo "$after" | grep -q 'instance launched' && fail "the stalled leader made the plan's cloud calls: $after"
echo "$after" | grep -q ' op=' && fail "the stalled leader logged the plan's decisions: $after"
echo "$after" | grep -q 'plan committed, its reply came late' || fail "a did not say its reply came late: $after"
kill -0 "$pid_a" 2>/dev/null || fail "the stalled leader died"

wait_for 60 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'succeeded'"'")" = 4 ]' \
    || fail "the work did not finish: $(psql_q 'SELECT id, state FROM jobs')"
dup=$(psql_q "SELECT count(*) FROM (SELECT node_id FROM simcloud.instances GROUP BY node_id HAVING count(*) > 1) d")
[ "$dup" = 0 ] || fail "$dup node rows have more than one instance"
grep -q 'instance launched' "$WORK/b.log" || fail "the successor launched nothing: the committed rows were not carried out"
echo "1 passed, 0 failed"
