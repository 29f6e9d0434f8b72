#!/usr/bin/env bash
# The database server dies: a real primary and a streaming standby
# (pg_basebackup -R) in temporary directories, two `tarmac serve` replicas
# with a two-host URL, a stream of submissions through the API and a sim
# cloud fleet under work (the sim cloud in the run's own cluster, as a real
# cloud is outside tarmac's database).  The primary is killed with -9 mid
# stream and the standby promoted (pg_ctl promote stands in for Patroni).
# Then: every job that got a 201 is present exactly once (sync; async: the
# lost ones are counted), every sim-cloud instance is known to the
# database, no instance was launched twice, the leader is back within
# LEADER_BOUND_S of the promotion, the dashboard and /metrics answer.
#   ha_failover.sh sync|async
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
mode=${1:?sync|async}
LEADER_BOUND_S=10

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PGD=$(mktemp -d /tmp/tarmac-ha-pg.XXXXXX); chmod 755 "$PGD"
[ "$(id -u)" = 0 ] && chown postgres: "$PGD"
stop_clusters() {
    # The replicas first (cleanup), then the servers; nothing here may stop
    # the trap early (set -e): the primary was killed already.
    cleanup || true
    for d in primary standby; do
        if [ -f "$PGD/$d/postmaster.pid" ]; then
            as_pg "$bindir/pg_ctl" -D "$PGD/$d" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
    rm -rf "$PGD" || true
}
trap stop_clusters EXIT
p1=$(free_port); p2=$(free_port)
as_pg "$bindir/initdb" -D "$PGD/primary" -A trust -U postgres -N --no-instructions >"$PGD/initdb.log" 2>&1 \
    || fail "initdb: $(cat "$PGD/initdb.log")"
cat >>"$PGD/primary/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $p1
unix_socket_directories = '$PGD'
fsync = off
full_page_writes = off
max_connections = 100
log_min_messages = warning
wal_level = replica
max_wal_senders = 4
CONF
as_pg "$bindir/pg_ctl" -D "$PGD/primary" -l "$PGD/primary.log" -w start >/dev/null || fail "primary did not start"
as_pg "$bindir/pg_basebackup" -h 127.0.0.1 -p "$p1" -U postgres -D "$PGD/standby" -R -X stream >/dev/null 2>&1 \
    || fail "pg_basebackup"
sed -i "s/^port = $p1/port = $p2/" "$PGD/standby/postgresql.conf"
as_pg "$bindir/pg_ctl" -D "$PGD/standby" -l "$PGD/standby.log" -w start >/dev/null || fail "standby did not start"
# Set on the primary after the base backup, so the promoted standby does not
# wait for a standby of its own (Patroni's synchronous_mode does the same).
if [ "$mode" = sync ]; then
    # Nothing commits until the standby has it: a 201 survives the failover.
    printf "synchronous_standby_names = '*'\nsynchronous_commit = on\n" >>"$PGD/primary/postgresql.conf"
else
    printf "synchronous_commit = local\n" >>"$PGD/primary/postgresql.conf"
fi
as_pg "$bindir/pg_ctl" -D "$PGD/primary" reload >/dev/null
psql -X -q -h 127.0.0.1 -p "$p1" -U postgres -d postgres -c "CREATE DATABASE tarmac" >/dev/null
wait_for 10 '[ "$(psql -X -tA -h 127.0.0.1 -p "$p1" -U postgres -d postgres -c "SELECT count(*) FROM pg_stat_replication WHERE state = '"'streaming'"'")" = 1 ]' \
    || fail "the standby does not stream"

DB="postgresql://postgres@127.0.0.1:$p1,127.0.0.1:$p2/tarmac?target_session_attrs=read-write"
NEW="postgresql://postgres@127.0.0.1:$p2/tarmac"   # the primary once promoted
SIMDB=$(new_db itest_ha_failover_${mode}_cloud)
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

python3 "$TM_SOURCE_DIR/tests/lib/ha_submit.py" "$ENG" 16 25 "${urls[@]}" >"$WORK/acks" 2>"$WORK/submit.log" &
sub=$!; PIDS+=("$sub")
sleep 5
kill_ms=$(date +%s%3N)
kill -9 "$(head -n 1 "$PGD/primary/postmaster.pid")"
as_pg "$bindir/pg_ctl" -D "$PGD/standby" -w promote >/dev/null || fail "promote"
promoted_ms=$(date +%s%3N)
DB=$NEW
# The first leader tick on the new primary is its first lease renewal.
wait_for "$LEADER_BOUND_S" '[ "$(psql_q "SELECT renewed_at >= to_timestamp('"$promoted_ms"' / 1000.0) FROM leader_lease" 2>/dev/null)" = t ]' \
    || fail "no leader tick within ${LEADER_BOUND_S} s of the promotion"
tick_ms=$(psql_q "SELECT (extract(epoch FROM renewed_at) * 1000)::bigint FROM leader_lease")
wait "$sub" || true
if [ "$mode" = async ]; then
    # Bad input: the database goes read-only mid-tick for 2 s (every
    # session's next transaction): writes refused with 25006, connections
    # dropped and retried, nothing half-applied (each write is one
    # transaction and cloud calls follow only a committed plan).
    ro() { PGOPTIONS='-c default_transaction_read_only=off' psql -X -q -d "$NEW" -c "$1" -c "SELECT pg_reload_conf()" >/dev/null; }
    seen=$(cat "$WORK/a.log" "$WORK/b.log" | grep -c 'read-only transaction' || true)
    ro "ALTER SYSTEM SET default_transaction_read_only = on"
    wait_for 10 '[ "$(cat "$WORK/a.log" "$WORK/b.log" | grep -c "read-only transaction")" -gt "$seen" ]' \
        || fail "nobody noticed the read-only database"
    sleep 1
    back_ms=$(date +%s%3N)
    ro "ALTER SYSTEM RESET default_transaction_read_only"
    wait_for 15 '[ "$(psql_q "SELECT renewed_at >= to_timestamp('"$back_ms"' / 1000.0) FROM leader_lease")" = t ]' \
        || fail "no leader tick after the read-only spell"
    for p in "${PIDS[@]:0:2}"; do kill -0 "$p" 2>/dev/null || fail "a replica died in the read-only spell"; done
    echo "read-only mid-tick: noticed, connections retried, the leader ticks again"
fi
sleep 4   # a few ticks: orphans adopted or terminated

acked=$(awk '$2 == 201' "$WORK/acks" | wc -l)
[ "$acked" -gt 20 ] || fail "only $acked submissions were acknowledged"
# API unavailability for submitters: the longest run without a 201 around the kill.
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
DB=$NEW
unknown=0
IFS=, read -ra insts <<<"$live"
for it in "${insts[@]}"; do
    [ -z "$it" ] && continue
    set -- $it
    [ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id = '$1' OR launch_token = '$2'")" -ge 1 ] || unknown=$((unknown + 1))
done
[ "$twice" = 0 ] || fail "$twice nodes were launched twice"
[ "$unknown" = 0 ] || fail "$unknown live instances are unknown to the database (orphans)"
for u in "${urls[@]}"; do
    curl -sf -o /dev/null --max-time 5 "$u/metrics" || fail "/metrics does not answer at $u"
    curl -sf -o /dev/null --max-time 5 "$u/" || fail "the dashboard does not answer at $u"
done
for r in a b; do grep -q 'event loop did not close' "$WORK/$r.log" && fail "replica $r"; done
kill -0 "${PIDS[@]:0:2}" 2>/dev/null || true
grep -h 'became leader' "$WORK/a.log" "$WORK/b.log" | tail -n 1 >&2
echo "failover ($mode standby): acknowledged $acked, lost $lost; primary death to first leader tick $((tick_ms - kill_ms)) ms; submitters without a 201 for ${gap_ms:-?} ms; live instances ${#insts[@]}, unknown $unknown, launched twice $twice"
if [ "$mode" = sync ]; then
    [ "$lost" = 0 ] || fail "$lost acknowledged jobs were lost with a synchronous standby"
fi
echo "1 passed, 0 failed"
