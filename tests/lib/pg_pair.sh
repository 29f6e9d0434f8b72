#!/usr/bin/env bash
# A PostgreSQL primary with a synchronous streaming standby in a temporary
# directory, and the faults done to it (scripts/soak.sh).  Source it after
# tests/lib/itest.sh.  Two data directories n0 and n1 keep their ports for
# ever; which one is the primary changes at each failover, so a two-host URL
# (target_session_attrs=read-write) always names both.
#   pair_init DIR          initdb n0, base-backup n1 from it, start both
#   pair_restart           restart the primary (-m fast)
#   pair_failover          kill -9 the primary, promote the standby, then
#                          base-backup a new standby from it in the old slot
#   pair_streaming         succeeds when the standby streams
#   pair_stop              stop both (immediate)
# PAIR_PORT[0..1], PAIR_PRIMARY (0 or 1) and PAIR_URL are set by pair_init.
PAIR_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
pair_as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pair_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pair_psql() { # pair_psql SLOT SQL: as the superuser, on one server
    psql -X -q -t -A -h 127.0.0.1 -p "${PAIR_PORT[$1]}" -U postgres -d postgres -c "$2"
}
pair_start_slot() {
    pair_as_pg "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/n$1" -l "$PAIR_DIR/n$1.log" -w -t 60 start >/dev/null
}
pair_standby() { echo $((1 - PAIR_PRIMARY)); }

pair_init() {
    PAIR_DIR=$1; mkdir -p "$PAIR_DIR"; chmod 755 "$PAIR_DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$PAIR_DIR"
    PAIR_PORT=("$(pair_free_port)" "$(pair_free_port)")
    PAIR_PRIMARY=0
    pair_as_pg "$PAIR_BIN/initdb" -D "$PAIR_DIR/n0" -A trust -U postgres -N --no-instructions >"$PAIR_DIR/initdb.log" 2>&1 \
        || fail "initdb: $(cat "$PAIR_DIR/initdb.log")"
    cat >>"$PAIR_DIR/n0/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PAIR_DIR'
fsync = off
full_page_writes = off
max_connections = 100
log_min_messages = warning
wal_level = replica
max_wal_senders = 4
wal_keep_size = 64MB
CONF
    echo "port = ${PAIR_PORT[0]}" >>"$PAIR_DIR/n0/postgresql.conf"
    pair_start_slot 0 || fail "the primary did not start"
    pair_psql 0 "CREATE DATABASE tarmac" >/dev/null
    pair_new_standby || fail "no standby"
    PAIR_URL="postgresql://postgres@127.0.0.1:${PAIR_PORT[0]},127.0.0.1:${PAIR_PORT[1]}/tarmac?target_session_attrs=read-write&connect_timeout=2"
}

pair_streaming() {
    [ "$(pair_psql "$PAIR_PRIMARY" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null)" = 1 ]
}

# Base-backup the standby slot from the primary, start it, and once it
# streams make commits wait for it (a 201 then survives a failover).
pair_new_standby() {
    local s; s=$(pair_standby)
    # A standby that is up but not streaming (yet) is stopped, not deleted
    # under its own feet.
    if [ -f "$PAIR_DIR/n$s/postmaster.pid" ]; then
        pair_as_pg "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/n$s" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "${PAIR_DIR:?}/n$s"
    pair_as_pg "$PAIR_BIN/pg_basebackup" -h 127.0.0.1 -p "${PAIR_PORT[$PAIR_PRIMARY]}" -U postgres \
        -D "$PAIR_DIR/n$s" -R -X stream --checkpoint=fast >>"$PAIR_DIR/basebackup.log" 2>&1 || return 1
    echo "port = ${PAIR_PORT[$s]}" >>"$PAIR_DIR/n$s/postgresql.conf"
    pair_start_slot "$s" || return 1
    wait_for 20 pair_streaming || return 1
    pair_psql "$PAIR_PRIMARY" "ALTER SYSTEM SET synchronous_standby_names = '*'" >/dev/null
    pair_psql "$PAIR_PRIMARY" "SELECT pg_reload_conf()" >/dev/null
}

pair_restart() {
    pair_as_pg "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/n$PAIR_PRIMARY" -l "$PAIR_DIR/n$PAIR_PRIMARY.log" \
        -m fast -w -t 60 restart >/dev/null
}

# The primary dies (-9); pg_ctl promote stands in for the failover tool.
# The promoted server stops waiting for a standby it no longer has (its
# copy of synchronous_standby_names came with the base backup), then gets a
# new one in the dead server's slot.
pair_failover() {
    local s; s=$(pair_standby)
    pair_streaming || return 1
    kill -9 "$(head -n 1 "$PAIR_DIR/n$PAIR_PRIMARY/postmaster.pid")"
    pair_as_pg "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/n$s" -w -t 60 promote >/dev/null || return 1
    PAIR_PRIMARY=$s
    pair_psql "$s" "ALTER SYSTEM RESET synchronous_standby_names" >/dev/null
    pair_psql "$s" "SELECT pg_reload_conf()" >/dev/null
    # The dead server's children may linger an instant after the postmaster.
    sleep 0.5
    pair_new_standby
}

pair_stop() {
    for s in 0 1; do
        if [ -f "$PAIR_DIR/n$s/postmaster.pid" ]; then
            pair_as_pg "$PAIR_BIN/pg_ctl" -D "$PAIR_DIR/n$s" -m immediate -w stop >/dev/null 2>&1 || true
        fi
    done
}
