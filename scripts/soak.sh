#!/usr/bin/env bash
# Chaos soak: for N minutes, faults drawn from a seed while
# jobs are submitted, cancelled and retagged through the API and a budget is
# raised; then invariants checked against the database and the sim cloud's
# own tables, printed as tables.  Exit 1 on any violation.
#
#   scripts/soak.sh --minutes N [--seed S]     (N may be a fraction: 0.5)
#
# What runs: a primary and a synchronous streaming standby (tests/lib/pg_pair.sh),
# two `tarmac serve` replicas with a two-host URL, the sim cloud in a
# separate cluster (its own state, as a real cloud's is outside tarmac's
# database) reached through a TCP forwarder (tests/lib/tcp_proxy.py), and
# tests/lib/soak_client.py.  Faults (one at a time, every 2-5 s): kill -9 of
# the leader or the follower (restarted), a restart of the primary, a
# failover (primary kill -9, standby promoted, a new standby base-backed-up
# from it), SIGSTOP of the leader past its lease then SIGCONT (it must not
# act once fenced), and the provider's connections reset (the forwarder
# killed and restarted: every sim-cloud connection drops), and the provider
# throttled or unavailable (half of its launch, terminate and list calls
# refused for a few seconds through the sim cloud's simcloud.faults table, as
# a cloud API answers 429 or 5xx; the EC2 fault proxy, tests/lib/fault_proxy.py,
# does the same to the real EC2 protocol in the aws tests).
# The first faults are one of each kind, in an order drawn from the seed,
# however short the run (--minutes 0.3 still injects all eight).
# Environment: TM_BIN (default build/tarmac), TM_TEST_STATE (ctest's
# cluster, else one is started), TM_KEEP_WORK=1 keeps the logs,
# SOAK_SELFTEST=1 plants a lost acknowledgement (the run must exit 1).
set -euo pipefail
minutes=1; seed=$(( $(date +%s) % 100000 ))
while [ $# -gt 0 ]; do
    case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "usage: soak.sh --minutes N [--seed S]" >&2; exit 2 ;;
    esac
done
echo "soak: seed $seed, $minutes minutes (replay: scripts/soak.sh --minutes $minutes --seed $seed)"
TM_SOURCE_DIR=${TM_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
export TM_SOURCE_DIR
export TM_BIN=${TM_BIN:-$TM_SOURCE_DIR/build/tarmac}
[ -x "$TM_BIN" ] || { echo "soak: no binary at $TM_BIN (build first)" >&2; exit 2; }
own_state=
if [ -z "${TM_TEST_STATE:-}" ]; then
    TM_TEST_STATE=$(mktemp -d /tmp/tarmac-soak-state.XXXXXX); own_state=1
    bash "$TM_SOURCE_DIR/tests/lib/pg_cluster.sh" start "$TM_TEST_STATE" >/dev/null
fi
export TM_TEST_STATE
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/pg_pair.sh"
PGD=$(mktemp -d /tmp/tarmac-soak-pg.XXXXXX)
finish() {
    cleanup || true
    pair_stop; rm -rf "$PGD" || true
    [ -n "$own_state" ] && bash "$TM_SOURCE_DIR/tests/lib/pg_cluster.sh" stop "$TM_TEST_STATE" >/dev/null
    true
}
trap finish EXIT
RANDOM=$seed
t_start=$(date +%s)
rnd() { echo $(( RANDOM % $1 )); }    # rnd N: 0..N-1 from the seed

# --- the database pair, the sim cloud behind its forwarder ---------------
pair_init "$PGD"
DB=$PAIR_URL
SIMDB=$(new_db "soak_cloud_$seed" 2>/dev/null)
sim_port=$(pair_free_port)
sim_target_port=$(echo "$SIMDB" | sed 's|.*:\([0-9]*\)/.*|\1|')
start_proxy() {
    python3 "$TM_SOURCE_DIR/tests/lib/tcp_proxy.py" "$sim_port" 127.0.0.1 "$sim_target_port" >>"$WORK/proxy.out" 2>&1 &
    proxy_pid=$!; PIDS+=("$proxy_pid")
    wait_for 10 "grep -q 'ready $sim_port' '$WORK/proxy.out'" || fail "the sim-cloud forwarder did not start"
}
start_proxy
export TARMAC_SIMCLOUD_URL=${SIMDB%:*}:$sim_port/${SIMDB##*/}

lease_ms=2000
write_config "$WORK/c.yaml" 6 3s 1s 300ms
sed -i 's/^  pool_size: 3$/  pool_size: 3\n  leader_lease: '"$lease_ms"'ms/' "$WORK/c.yaml"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/metrics.token"
metrics_token=$(cat "$WORK/metrics.token")
printf 'api:\n  request_timeout: 2s\n  metrics_token_file: "%s"\n' "$WORK/metrics.token" >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate: $(cat "$WORK/migrate.log")"
TOK_A=$("$TARMAC" token create --config "$WORK/c.yaml" --name soak-a --role engineer --team a 2>>"$WORK/cli.log")
TOK_B=$("$TARMAC" token create --config "$WORK/c.yaml" --name soak-b --role engineer --team b 2>>"$WORK/cli.log")
TOK_ADM=$("$TARMAC" token create --config "$WORK/c.yaml" --name soak-admin --role admin 2>>"$WORK/cli.log")

# --- the replicas ---------------------------------------------------------
declare -A pid port
port[a]=$(pair_free_port); port[b]=$(pair_free_port)
start_replica() { # start_replica NAME
    TARMAC_LISTEN="127.0.0.1:${port[$1]}" "$TARMAC" serve --config "$WORK/c.yaml" \
        >>"$WORK/$1.out" 2>>"$WORK/$1.log" &
    pid[$1]=$!; PIDS+=("$!")
}
start_replica a; start_replica b
URLS=("http://127.0.0.1:${port[a]}" "http://127.0.0.1:${port[b]}")
for r in a b; do wait_for 30 "curl -s -o /dev/null --max-time 2 ${URLS[0]%:*}:${port[$r]}/healthz" || fail "replica $r: no API"; done
leader() { # prints a or b, the replica holding the lease (nothing if none)
    local h; h=$(psql_q "SELECT holder FROM leader_lease WHERE expires_at > now()" 2>/dev/null || true)
    for r in a b; do [ -n "$h" ] && [ "${h##*:}" = "${pid[$r]}" ] && { echo "$r"; return; }; done
    true
}
wait_for 30 '[ -n "$(leader)" ]' || fail "no leader"
curl -sf -o /dev/null --max-time 5 -X PUT -H "Authorization: Bearer $TOK_ADM" -H 'Content-Type: application/json' \
    -d '{"cap_cents": 40, "period": "month", "hard": true, "warn_percent": 80}' "${URLS[0]}/v1/budgets/b" \
    || fail "could not set team b's budget"

python3 "$TM_SOURCE_DIR/tests/lib/soak_client.py" "$seed" "$WORK/stop" "$WORK/client.out" \
    "$TOK_A" "$TOK_B" "$TOK_ADM" "${URLS[@]}" 2>"$WORK/client.log" &
client=$!; PIDS+=("$client")

# --- faults ---------------------------------------------------------------
KINDS=(kill9_leader kill9_follower pg_restart failover sigstop_leader provider_reset
       provider_throttle provider_5xx)
declare -A injected skipped
for k in "${KINDS[@]}"; do injected[$k]=0; skipped[$k]=0; done
order=("${KINDS[@]}")
for i in $(seq $((${#order[@]} - 1)) -1 1); do   # Fisher-Yates from the seed
    j=$(rnd $((i + 1))); t=${order[$i]}; order[$i]=${order[$j]}; order[$j]=$t
done
stale_acts=0; fence_checks=0; fence_followers=0; rebuild_fail=0
# A replica the soak did not kill is found dead: a crash (counted, restarted).
crashes=0
ensure_up() {
    for r in a b; do
        kill -0 "${pid[$r]}" 2>/dev/null && continue
        crashes=$((crashes + 1)); echo "$(date +%T) replica $r died on its own" >>"$WORK/faults.log"
        start_replica "$r"
    done
}
other() { [ "$1" = a ] && echo b || echo a; }

do_fault() {
    local kind=$1 l v lines
    case $kind in
    kill9_leader|kill9_follower|sigstop_leader)
        # The leader read once: a second read may fall in a takeover.
        l=; wait_for 15 'l=$(leader); [ -n "$l" ]' || { skipped[$kind]=$((skipped[$kind] + 1)); return; }
        v=$l; [ "$kind" = kill9_follower ] && v=$(other "$l")
        if [ "$kind" = sigstop_leader ]; then
            kill -STOP "${pid[$v]}"
            sleep $(( (lease_ms + 1000) / 1000 )).$(rnd 10)
            lines=$(wc -l <"$WORK/$v.log")
            kill -CONT "${pid[$v]}"
            sleep 2
            # From SIGCONT to its next "became leader", the stale leader
            # must apply nothing (its epoch is fenced) and must notice.  The
            # one exception: decisions logged at once on SIGCONT, before it
            # reads that its leader connection is gone, are a plan committed
            # before the stop whose answer sat in its socket (the log line
            # follows the commit); any "op=" line after "leadership lost" is
            # a plan applied stale.  Only the leader connection's loss
            # counts: the API's pool connections may report theirs first, in
            # the same loop iteration as that backlog (seen in a 30-minute
            # run: a 503 past the request deadline, then the backlog).
            tail -n +"$((lines + 1))" "$WORK/$v.log" | sed '/became leader/,$d' >"$WORK/after_stop"
            fence_checks=$((fence_checks + 1))
            # The lease row may still name a replica that has just lost the
            # lead (its session ended, its lease broken by the other) when
            # the fault reads it: by its own log it was a follower at the
            # stop, and there is no stale leader to check.
            if ! head -n "$lines" "$WORK/$v.log" | grep -E 'became leader|leadership lost' | tail -n 1 \
                 | grep -q 'became leader'; then
                fence_followers=$((fence_followers + 1))
            elif awk '/leadership lost/ { gone = 1 }
                    gone && / op=/ { bad = 1 } END { exit !bad }' "$WORK/after_stop" \
               || ! grep -q 'leadership lost' "$WORK/after_stop"; then
                stale_acts=$((stale_acts + 1)); cp "$WORK/after_stop" "$WORK/stale_act.$fence_checks.log"
            fi
        else
            kill -9 "${pid[$v]}"; wait "${pid[$v]}" 2>/dev/null || true
            sleep 0.$(rnd 10)
            start_replica "$v"
        fi ;;
    pg_restart) pair_restart || fail "the primary did not restart" ;;
    failover)
        if ! pair_streaming; then skipped[$kind]=$((skipped[$kind] + 1)); return; fi
        pair_failover || rebuild_fail=$((rebuild_fail + 1)) ;;
    provider_reset)
        kill -9 "$proxy_pid"; wait "$proxy_pid" 2>/dev/null || true
        sleep 0.$(( 3 + $(rnd 7) ))
        start_proxy ;;
    provider_throttle|provider_5xx)
        local fk=throttle; [ "$kind" = provider_5xx ] && fk=unavailable
        sim_faults "INSERT INTO simcloud.faults VALUES ('launch', '$fk', 0.5), ('terminate', '$fk', 0.5),
                    ('list', '$fk', 0.5) ON CONFLICT (op) DO UPDATE SET kind = EXCLUDED.kind, rate = EXCLUDED.rate" \
            || { skipped[$kind]=$((skipped[$kind] + 1)); return; }
        sleep $(( 2 + $(rnd 4) )).$(rnd 10)
        sim_faults "DELETE FROM simcloud.faults" || fail "could not end the provider's faults" ;;
    esac
    injected[$kind]=$((injected[$kind] + 1))
    echo "$(date +%T) fault $kind${v:+ on $v}" >>"$WORK/faults.log"
}

# sim_faults SQL: on the sim cloud's own database (not through the forwarder).
sim_faults() { psql -X -q -v ON_ERROR_STOP=1 -d "$SIMDB" -c "$1" >/dev/null 2>>"$WORK/faults.log"; }

t_faults=$(date +%s)
end_s=$(python3 -c "import time; print(int(time.time() + $minutes * 60))")
n=0
# One of each kind first, however short the run; then random kinds until the end.
while [ $n -lt ${#order[@]} ] || [ "$(date +%s)" -lt "$end_s" ]; do
    if [ $n -lt ${#order[@]} ]; then kind=${order[$n]}; else kind=${KINDS[$(rnd ${#KINDS[@]})]}; fi
    n=$((n + 1))
    do_fault "$kind"
    ensure_up
    # Short gaps in the first round keep the suite's short form brief.
    if [ $n -le ${#order[@]} ]; then sleep 1.$(rnd 10); else sleep $(( 1 + $(rnd 3) )).$(rnd 10); fi
done

# --- recovery, then the invariants ------------------------------------------
t_recover=$(date +%s)
ensure_up
# A standby reconnecting after a restart of the primary streams again within
# wal_retrieve_retry_interval (5 s); only one still not streaming is rebuilt.
wait_for 20 pair_streaming || pair_new_standby || rebuild_fail=$((rebuild_fail + 1))
touch "$WORK/stop"
wait "$client" || fail "the client failed: $(tail -n 5 "$WORK/client.log")"
wait_for 30 '[ -n "$(leader)" ]' || fail "no leader after the soak"
t0_ms=$(date +%s%3N)
wait_for 30 '[ "$(psql_q "SELECT renewed_at > to_timestamp('"$t0_ms"' / 1000.0) FROM leader_lease" 2>/dev/null)" = t ]' \
    || fail "the leader does not tick after the soak"
sleep 4   # a few ticks: launches in flight recorded, orphans adopted or terminated

t_check=$(date +%s)
rows=(); violations=0
check() { # check NAME EXPECTED FOUND: a row of the table
    local ok=yes
    [ "$2" = "$3" ] || { ok=NO; violations=$((violations + 1)); }
    rows+=("$1|$2|$3|$ok")
}
C=$WORK/client.out
# SOAK_SELFTEST=1: claim one acknowledgement the database never saw, so the
# run must end in a violation (the checks can fail).
[ -n "${SOAK_SELFTEST:-}" ] && echo "ack soak-selftest 999999999 201" >>"$C"
awk '$1 == "ack" { print $2, $3 }' "$C" | sort -u >"$WORK/acked"
acked=$(wc -l <"$WORK/acked")
psql_q "SELECT i.key, i.job_id FROM api_idempotency i JOIN jobs j ON j.id = i.job_id WHERE i.key LIKE 'soak-%'" \
    | tr '|' ' ' | sort >"$WORK/present"
# One snapshot of the database for the scalar checks (each psql costs
# a second on a loaded machine).  The ledger: whole cents plus carried
# micro-dollars equal each node's price x the time accrued
# (0003_ledger.sql), to a micro-dollar.
IFS='|' read -r in_db dup_keys fin_twice dup_tokens led_book led_time past_end overshoot \
    n_ok n_cancel epoch cents <<<"$(psql_q "SELECT
  (SELECT count(*) FROM jobs),
  (SELECT count(*) FROM (SELECT 1 FROM api_idempotency GROUP BY token_hash, key HAVING count(*) > 1) d),
  (SELECT count(*) FROM jobs j WHERE
      (SELECT count(*) FROM decisions d WHERE d.subject_kind = 'job' AND d.subject_id = j.id::text
          AND d.kind IN ('job_succeeded', 'job_failed')) > greatest(j.attempts, 1)
   OR (SELECT count(*) FROM decisions d WHERE d.subject_kind = 'job' AND d.subject_id = j.id::text
          AND d.kind = 'job_succeeded') > 1),
  (SELECT count(*) FROM (SELECT 1 FROM nodes WHERE launch_token IS NOT NULL GROUP BY launch_token HAVING count(*) > 1) d),
  round((SELECT coalesce(sum(cents), 0) * 10000 FROM spend) + (SELECT coalesce(sum(uusd), 0) FROM spend_carry), 0),
  (SELECT round(coalesce(sum(price_uusd_per_hour::numeric * (accrued_to_ms - billed_from_ms) / 3600000), 0), 0)
     FROM nodes WHERE billed_from_ms IS NOT NULL AND accrued_to_ms IS NOT NULL),
  (SELECT count(*) FROM nodes WHERE terminated_ms IS NOT NULL AND accrued_to_ms > terminated_ms),
  (SELECT count(*) FROM budgets b WHERE b.hard AND b.scope_kind = 'team'
      AND (SELECT coalesce(sum(cents), 0) FROM spend s WHERE s.team = b.scope
            AND s.period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')) > b.cap_cents),
  (SELECT count(*) FROM jobs WHERE state = 'succeeded'),
  (SELECT count(*) FROM jobs WHERE state = 'cancelled'),
  (SELECT epoch FROM leader),
  (SELECT coalesce(sum(cents), 0) FROM spend)")"
check "jobs acknowledged (201) = jobs in the database" "$acked" "$in_db"
check "acknowledged jobs missing from the database" 0 "$(comm -23 "$WORK/acked" "$WORK/present" | wc -l)"
check "keys answered with two different jobs" 0 "$(grep -c '^mismatch' "$C" || true)"
check "keys holding more than one job" 0 "$dup_keys"
check "submissions never answered (after recovery retries)" 0 "$(grep -c '^unanswered' "$C" || true)"
check "submissions refused (4xx)" 0 "$(grep -c '^refused' "$C" || true)"
check "jobs finished more than once per attempt" 0 "$fin_twice"
DB=$SIMDB
psql_q "SELECT token FROM simcloud.instances WHERE cluster = 'itest'" | sort >"$WORK/cloud_tokens"
IFS='|' read -r cloud_dup cloud_live <<<"$(psql_q "SELECT
  (SELECT count(*) FROM (SELECT 1 FROM simcloud.instances GROUP BY token HAVING count(*) > 1) d),
  (SELECT count(*) FROM simcloud.instances WHERE cluster = 'itest' AND terminate_requested_ms IS NULL)")"
DB=$PAIR_URL
psql_q "SELECT launch_token FROM nodes WHERE launch_token IS NOT NULL" | sort >"$WORK/db_tokens"
check "cloud instances unknown to the database" 0 "$(comm -23 "$WORK/cloud_tokens" "$WORK/db_tokens" | wc -l)"
check "launch tokens used by two instances" 0 "$cloud_dup"
check "launch tokens on two node rows" 0 "$dup_tokens"
check "ledger uusd (cents x 10^4 + carry) = node-time x price" "$led_time" "$led_book"
check "nodes accrued past their termination" 0 "$past_end"
check "hard budgets overshot (team spend this month > cap)" 0 "$overshoot"
check "stale leader applied a plan after SIGCONT or never noticed" 0 "$stale_acts"
check "replicas that died without being killed" 0 "$crashes"
for u in "${URLS[@]}"; do
    curl -sf -o /dev/null --max-time 5 -H "Authorization: Bearer $metrics_token" "$u/metrics" || check "/metrics answers at $u" yes no
done
leaks=0
for s in "$TOK_A" "$TOK_B" "$TOK_ADM" "$metrics_token"; do
    for f in "$WORK"/*.log "$WORK"/*.out "$PGD"/*.log; do
        [ -f "$f" ] && grep -qF -- "$s" "$f" && { leaks=$((leaks + 1)); echo "secret in $f" >&2; }
    done
done
check "secrets (API and metrics tokens) in any log" 0 "$leaks"

echo
echo "| invariant | expected | found | ok |"
echo "|---|---|---|---|"
for r in "${rows[@]}"; do IFS='|' read -r a b c d <<<"$r"; echo "| $a | $b | $c | $d |"; done
echo
echo "| fault | injected | skipped |"
echo "|---|---|---|"
total=0
for k in "${KINDS[@]}"; do echo "| $k | ${injected[$k]} | ${skipped[$k]} |"; total=$((total + injected[$k])); done
echo "| all | $total | |"
echo
echo "workload: $(grep -c '^ack' "$C" || true) acknowledged, $(grep -c '^gaveup' "$C" || true) given up then retried," \
     "$(grep -c '^cancel' "$C" || true) cancels, $(grep -c '^retag' "$C" || true) retags," \
     "$(grep -c '^budget' "$C" || true) budget sets, $(sed -n 's/^tries //p' "$C") requests;" \
     "jobs succeeded $n_ok, cancelled $n_cancel;" \
     "cloud instances $(wc -l <"$WORK/cloud_tokens") (live $cloud_live); ledger $cents cents;" \
     "leader epoch $epoch; standby rebuilds failed $rebuild_fail; fence checks $fence_checks ($fence_followers of them on a replica that had lost the lead just before the stop)"
echo "budgets (hard, team): $(psql_q "SELECT coalesce(string_agg(b.scope || ' spent ' || (SELECT coalesce(sum(cents), 0) FROM spend s
        WHERE s.team = b.scope AND s.period = to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')) || ' of ' || b.cap_cents || ' cents', ', '), 'none')
        FROM budgets b WHERE b.hard AND b.scope_kind = 'team'"); team b jobs queued at the end: $(psql_q "SELECT count(*) FROM jobs WHERE state = 'queued' AND team = 'b'")"
echo "phases: setup $((t_faults - t_start)) s, faults $((t_recover - t_faults)) s, recovery $((t_check - t_recover)) s, checks $(( $(date +%s) - t_check )) s"
if [ "$violations" -gt 0 ]; then
    echo "soak: $violations violation(s); seed $seed" >&2
    TM_KEEP_WORK=1
    exit 1
fi
echo "soak: all invariants hold (seed $seed)"
