#!/usr/bin/env bash
# The database server dies under a real failover tool: Patroni (with a
# one-member etcd) manages a primary and a synchronous standby
# (tests/lib/patroni_pair.sh), two `tarmac serve` replicas use the two-host
# URL (target_session_attrs=read-write), submissions stream through the API
# and a sim cloud fleet is under work, as in ha_failover.sh.  Nobody calls
# pg_ctl; the primary dies in one of two ways:
#   postgres  its postmaster is killed with -9; its Patroni, alive, notices
#             the crash at its next loop, gives up the leader key and the
#             synchronous standby's Patroni promotes it
#   node      its Patroni and its postmaster are killed with -9 (the server
#             is gone): the leader key expires after Patroni's ttl, then the
#             standby is promoted; the dead member's Patroni is started
#             again once that is over (the server comes back)
# Then: the new primary is the member that was the synchronous standby,
# every job that got a 201 is present exactly once, every sim-cloud
# instance is known to the database and none was launched twice, the
# leader is back within LEADER_BOUND_S of the promotion (docs/ha.md), the
# old primary rejoins as the synchronous standby, the API answers.
#   ha_patroni.sh postgres|node
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/patroni_pair.sh"
mode=${1:?postgres|node}
LEADER_BOUND_S=10
# The submitters run on past the promotion: Patroni's ttl (10 s) longer
# when the leader key has to expire.
case "$mode" in
postgres) submit_s=14 ;;
node) submit_s=24 ;;
*) fail "mode: postgres or node, not $mode" ;;
esac

# Settings meant for another etcd or Patroni must not steer these ones.
for v in $(compgen -e | grep -E '^(ETCD|ETCDCTL|PATRONI)_' || true); do unset "$v"; done
PGD=$(mktemp -d /tmp/tarmac-patroni.XXXXXX)
stop_all() {
    # The replicas first (cleanup), then Patroni and its postgres, then etcd;
    # nothing here may stop the trap early (set -e).
    cleanup || true
    ppair_stop || true
    if [ -n "${TM_KEEP_WORK:-}" ]; then echo "kept $PGD" >&2; else rm -rf "$PGD" || true; fi
}
trap stop_all EXIT
t0=$(date +%s%3N)
ppair_init "$PGD"
psql -X -q -h 127.0.0.1 -p "${PPAIR_PG[0]}" -U postgres -d postgres -c "CREATE DATABASE tarmac" >/dev/null
[ "$(psql -X -tA -h 127.0.0.1 -p "${PPAIR_PG[0]}" -U postgres -d postgres -c "SHOW synchronous_standby_names")" = n1 ] \
    || fail "Patroni did not make n1 the synchronous standby"
echo "Patroni pair up in $(( $(date +%s%3N) - t0 )) ms: $(ppair_members | tr '\n' ';')"

DB=$PPAIR_URL
NEW="postgresql://postgres@127.0.0.1:${PPAIR_PG[1]}/tarmac"   # n1 once promoted
# A database of this mode's own: the two modes run side by side under
# ctest -j, and a cloud they shared would hold both fleets' node ids.
SIMDB=$(new_db "itest_ha_patroni_${mode}_cloud")
export TARMAC_SIMCLOUD_URL=$SIMDB
write_config "$WORK/c.yaml" 6 3s 1s 300ms
sed -i 's/^  pool_size: 3$/  pool_size: 3\n  leader_lease: 2s/' "$WORK/c.yaml"
printf 'api:\n  request_timeout: 2s\n' >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate: $(cat "$WORK/migrate.log")"
ENG=$("$TARMAC" token create --config "$WORK/c.yaml" --name ha-eng --role engineer --team a 2>/dev/null)
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 4 --runtime 6s --count 6 >/dev/null
urls=()
for r in a b; do
    "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/$r.out" 2>"$WORK/$r.log" &
    PIDS+=("$!")
    wait_for 20 "grep -q 'api listening' '$WORK/$r.log'" || fail "replica $r: no API"
    urls+=("http://127.0.0.1:$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/$r.log" | head -n 1)")
done
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL")" -ge 1 ]' \
    || fail "the fleet never launched"

python3 "$TM_SOURCE_DIR/tests/lib/ha_submit.py" "$ENG" "$submit_s" 25 "${urls[@]}" >"$WORK/acks" 2>"$WORK/submit.log" &
sub=$!; PIDS+=("$sub")
sleep 4
[ "$(ppair_leader)" = n0 ] && [ "$(ppair_sync)" = n1 ] || fail "before the kill: $(ppair_members | tr '\n' ';')"
epoch0=$(psql_q "SELECT epoch FROM leader_lease")
kill_ms=$(date +%s%3N)
if [ "$mode" = postgres ]; then ppair_kill_postgres 0; else ppair_kill_node 0; fi
DB=$NEW
wait_for 60 '[ "$(psql_q "SELECT NOT pg_is_in_recovery()" 2>/dev/null)" = t ]' \
    || fail "Patroni did not promote n1 within 60 s: $(ppair_members | tr '\n' ';')"
# The promotion is over when n1's postmaster says it takes writes (as a
# standby it said "read-only connections"): its log line, to the ms.
stamp=$(grep -h 'database system is ready to accept connections' "$PGD/patroni-n1.log" | tail -n 1 | awk '{ print $1, $2, $3 }')
[ -n "$stamp" ] || fail "n1 takes writes but did not log its promotion"
promoted_ms=$(date -d "$stamp" +%s%3N)
# The leader is back when a replica has taken the lead on n1: the lease's
# epoch moved past the one before the kill (a renewal time would not do:
# the old leader may renew in the instant between kill_ms and the kill).
wait_for "$LEADER_BOUND_S" '[ "$(psql_q "SELECT epoch > '"$epoch0"' FROM leader_lease" 2>/dev/null)" = t ]' \
    || fail "no leader on n1 within ${LEADER_BOUND_S} s of the promotion"
epoch1=$(psql_q "SELECT epoch FROM leader_lease")
# The instant it took the lead, from its log (milliseconds, UTC).
stamp=$(grep -h "became leader.* epoch=$epoch1\$" "$WORK/a.log" "$WORK/b.log" | head -n 1 | cut -d' ' -f1)
[ -n "$stamp" ] || fail "epoch $epoch1 leads on n1 but no replica logged it"
leader_ms=$(date -d "$stamp" +%s%3N)
[ "$((leader_ms - promoted_ms))" -le $((LEADER_BOUND_S * 1000)) ] \
    || fail "the leader came back $((leader_ms - promoted_ms)) ms after the promotion"
wait_for 10 '[ "$(ppair_leader)" = n1 ]' || fail "Patroni does not report n1 as leader: $(ppair_members | tr '\n' ';')"
if [ "$mode" = node ]; then ppair_start_member 0; fi
wait "$sub" || true
# Patroni brings the crashed primary back as a standby of n1 (pg_rewind
# where the timelines diverged) and makes it synchronous again.
wait_for 40 '[ "$(ppair_sync)" = n0 ]' || fail "the old primary did not rejoin as the synchronous standby: $(ppair_members | tr '\n' ';')"
rejoin_ms=$(date +%s%3N)
sleep 2   # a few ticks: orphans adopted or terminated

acked=$(awk '$2 == 201' "$WORK/acks" | wc -l)
[ "$acked" -gt 20 ] || fail "only $acked submissions were acknowledged"
after=$(awk -v p="$promoted_ms" '$2 == 201 && $1 >= p' "$WORK/acks" | wc -l)
[ "$after" -gt 0 ] || fail "no submission was acknowledged after the promotion"
first_ms=$(awk -v p="$promoted_ms" '$2 == 201 && $1 >= p { print $1; exit }' "$WORK/acks")
gap_ms=$(awk -v k="$kill_ms" '$2 == 201 && $1 >= k - 2000 { if (last && $1 - last > max) max = $1 - last; last = $1 }
                                END { print max + 0 }' "$WORK/acks")
awk '$2 == 201 { print $3, $4 }' "$WORK/acks" | sort >"$WORK/acked"
psql_q "SELECT key, job_id FROM api_idempotency i JOIN jobs j ON j.id = i.job_id" | tr '|' ' ' | sort >"$WORK/present"
lost=$(comm -23 "$WORK/acked" "$WORK/present" | wc -l)
dups=$(psql_q "SELECT count(*) FROM (SELECT key FROM api_idempotency GROUP BY key HAVING count(*) > 1) d")
[ "$dups" = 0 ] || fail "a key holds several jobs"
extra=$(psql_q "SELECT count(*) FROM jobs WHERE team = 'a' AND gpus = 1 AND id NOT IN (SELECT job_id FROM api_idempotency)")
[ "$extra" = 0 ] || fail "$extra jobs were queued without their key"
# The cloud side: every live instance known to the database, none twice.
DB=$SIMDB
live=$(psql_q "SELECT coalesce(string_agg(id || ' ' || token, ','), '') FROM simcloud.instances WHERE cluster = 'itest'
               AND terminate_requested_ms IS NULL")
twice=$(psql_q "SELECT count(*) FROM (SELECT node_id FROM simcloud.instances WHERE cluster = 'itest'
                GROUP BY node_id HAVING count(*) > 1) d")
# For the message: the first doubled nodes' tokens, whose times say which
# controller (and which pass) asked for each instance.
doubled=$(psql_q "SELECT coalesce(string_agg(node_id || ': ' || tokens, '; '), '') FROM (
                    SELECT node_id, string_agg(token || ' at ' || launched_ms, ', ' ORDER BY launched_ms) AS tokens
                      FROM simcloud.instances WHERE cluster = 'itest'
                     GROUP BY node_id HAVING count(*) > 1 ORDER BY node_id LIMIT 3) d")
DB=$NEW
unknown=0
IFS=, read -ra insts <<<"$live"
for it in "${insts[@]}"; do
    [ -z "$it" ] && continue
    set -- $it
    [ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id = '$1' OR launch_token = '$2'")" -ge 1 ] || unknown=$((unknown + 1))
done
[ "$twice" = 0 ] || fail "$twice nodes were launched twice (node: token at launched_ms) $doubled"
[ "$unknown" = 0 ] || fail "$unknown live instances are unknown to the database (orphans)"
for u in "${urls[@]}"; do
    curl -sf -o /dev/null --max-time 5 "$u/metrics" || fail "/metrics does not answer at $u"
done
for p in "${PIDS[@]:0:2}"; do kill -0 "$p" 2>/dev/null || fail "a replica died in the failover"; done
for r in a b; do grep -q 'event loop did not close' "$WORK/$r.log" && fail "replica $r"; done
echo "Patroni failover ($mode killed, synchronous standby): acknowledged $acked ($after after the promotion), lost $lost;" \
     "kill -9 to promotion $((promoted_ms - kill_ms)) ms; promotion to leader back $((leader_ms - promoted_ms)) ms" \
     "(kill to leader back $((leader_ms - kill_ms)) ms); kill to first 201 after the promotion $(( ${first_ms:-$kill_ms} - kill_ms )) ms;" \
     "submitters without a 201 for $gap_ms ms; old primary back as synchronous standby $((rejoin_ms - kill_ms)) ms after the kill;" \
     "live instances ${#insts[@]}, unknown $unknown, launched twice $twice"
[ "$lost" = 0 ] || fail "$lost acknowledged jobs were lost with a synchronous standby under Patroni"
echo "1 passed, 0 failed"
