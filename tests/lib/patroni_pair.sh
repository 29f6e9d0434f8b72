#!/usr/bin/env bash
# A PostgreSQL primary and a synchronous standby managed by Patroni, with a
# one-member etcd as its consensus store, all on 127.0.0.1 with ports of
# their own and every file under one temporary directory (Debian's
# etcd.service and patroni.service, if the packages started them, use
# other ports and directories and are never touched).  Source it after
# tests/lib/itest.sh.
#   ppair_init DIR         start etcd and Patroni n0 (bootstraps the primary),
#                          then n1 (clones it); wait for a synchronous standby
#   ppair_leader           the name (n0 or n1) of the member holding the
#                          leader key, from Patroni's REST API; empty if none
#   ppair_sync             the name of the synchronous standby; empty if none
#   ppair_kill_postgres N  kill -9 member N's postmaster (Patroni lives on)
#   ppair_kill_node N      kill -9 member N's Patroni and postmaster
#   ppair_start_member N   start member N's Patroni (again)
#   ppair_stop             stop both Patronis (and their postgres) and etcd
# PPAIR_PG[0..1], PPAIR_API[0..1] (Patroni's REST ports) and PPAIR_URL (a
# two-host URL, target_session_attrs=read-write) are set by ppair_init.
#
# The timings (bootstrap.dcs, written to etcd by the first member) are as
# short as a loopback test allows while keeping Patroni's own rule
# ttl >= loop_wait + 2 * retry_timeout: ttl 10 s, loop_wait 1 s,
# retry_timeout 3 s.  primary_start_timeout 0: a crashed primary is failed
# over at once rather than restarted in place (with synchronous_mode that
# loses nothing acknowledged); docs/ha.md says why.
PPAIR_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
ppair_as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
ppair_free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PPAIR_PIDS=()   # Patroni's pid by member
# ppair_spawn NAME CMD...: CMD in the background as the postgres user; its
# own pid (not runuser's, which would not pass a kill -9 on) in NAME.pid.
ppair_spawn() {
    local name=$1; shift
    rm -f "$PPAIR_DIR/$name.pid"
    ppair_as_pg sh -c 'echo $$ >"$0"; exec "$@"' "$PPAIR_DIR/$name.pid" "$@" >>"$PPAIR_DIR/$name.log" 2>&1 &
    wait_for 10 '[ -s "$PPAIR_DIR/$name.pid" ]' || fail "$name did not start"
}

# ppair_api N PATH: GET on member N's REST API, the body on stdout.
ppair_api() { curl -s --max-time 2 "http://127.0.0.1:${PPAIR_API[$1]}$2"; }

# The cluster as Patroni sees it, from whichever member answers: one
# "NAME ROLE STATE" line per member.
ppair_members() {
    local n out
    for n in 0 1; do
        out=$(ppair_api "$n" /cluster 2>/dev/null) || continue
        [ -n "$out" ] || continue
        python3 -c 'import json, sys
for m in json.load(sys.stdin).get("members", []):
    print(m["name"], m["role"], m.get("state", "-"))' <<<"$out" 2>/dev/null && return 0
    done
    return 1
}
ppair_leader() { ppair_members 2>/dev/null | awk '$2 == "leader" && $3 == "running" { print $1 }'; }
ppair_sync() { ppair_members 2>/dev/null | awk '$2 == "sync_standby" && ($3 == "running" || $3 == "streaming") { print $1 }'; }

ppair_write_config() { # N
    local n=$1
    cat >"$PPAIR_DIR/n$n.yml" <<YAML
scope: tarmac-itest
namespace: /tarmac-itest/
name: n$n
restapi:
  listen: 127.0.0.1:${PPAIR_API[$n]}
  connect_address: 127.0.0.1:${PPAIR_API[$n]}
etcd3:
  hosts: 127.0.0.1:$PPAIR_ETCD
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    primary_start_timeout: 0
    synchronous_mode: true
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        # fsync off: a test's speed; full_page_writes stays on, as
        # pg_rewind (the old primary's way back) needs it.
        fsync: "off"
        max_connections: 100
        wal_keep_size: 64MB
        log_min_messages: warning
  initdb:
    - encoding: UTF8
    - username: postgres
postgresql:
  listen: 127.0.0.1:${PPAIR_PG[$n]}
  connect_address: 127.0.0.1:${PPAIR_PG[$n]}
  data_dir: $PPAIR_DIR/n$n
  bin_dir: $PPAIR_BIN
  pgpass: $PPAIR_DIR/pgpass$n
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
    rewind:
      username: postgres
  parameters:
    unix_socket_directories: '$PPAIR_DIR'
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
YAML
}

ppair_start_member() { # N
    ppair_spawn "patroni-n$1" patroni "$PPAIR_DIR/n$1.yml"
    PPAIR_PIDS[$1]=$(cat "$PPAIR_DIR/patroni-n$1.pid")
}

ppair_init() {
    PPAIR_DIR=$1; mkdir -p "$PPAIR_DIR"; chmod 755 "$PPAIR_DIR"
    [ "$(id -u)" = 0 ] && chown postgres: "$PPAIR_DIR"
    command -v patroni >/dev/null && command -v etcd >/dev/null \
        || fail "patroni or etcd missing (Debian: apt-get install patroni etcd-server; scripts/setup.sh does)"
    [ -x "$PPAIR_BIN/initdb" ] || fail "no PostgreSQL server under /usr/lib/postgresql"
    PPAIR_ETCD=$(ppair_free_port); local peer; peer=$(ppair_free_port)
    PPAIR_PG=("$(ppair_free_port)" "$(ppair_free_port)")
    PPAIR_API=("$(ppair_free_port)" "$(ppair_free_port)")
    # etcd 3.4 serves the v3 API (Patroni's etcd3 section) by default; its
    # v2 API would need --enable-v2.
    ppair_spawn etcd etcd --name e0 --data-dir "$PPAIR_DIR/etcd" \
        --listen-client-urls "http://127.0.0.1:$PPAIR_ETCD" --advertise-client-urls "http://127.0.0.1:$PPAIR_ETCD" \
        --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
        --initial-cluster "e0=http://127.0.0.1:$peer" --initial-cluster-state new
    PPAIR_ETCD_PID=$(cat "$PPAIR_DIR/etcd.pid")
    wait_for 20 'curl -sf --max-time 1 "http://127.0.0.1:$PPAIR_ETCD/health" | grep -q true' \
        || fail "etcd did not start: $(tail -n 5 "$PPAIR_DIR/etcd.log")"
    ppair_write_config 0; ppair_write_config 1
    ppair_start_member 0
    wait_for 60 '[ "$(ppair_leader)" = n0 ]' || fail "Patroni n0 did not bootstrap a primary"
    ppair_start_member 1
    wait_for 60 '[ "$(ppair_sync)" = n1 ]' || fail "Patroni n1 did not become the synchronous standby"
    PPAIR_URL="postgresql://postgres@127.0.0.1:${PPAIR_PG[0]},127.0.0.1:${PPAIR_PG[1]}/tarmac?target_session_attrs=read-write&connect_timeout=2"
}

# The member's postmaster pid, from its data directory.
ppair_postmaster() { head -n 1 "$PPAIR_DIR/n$1/postmaster.pid" 2>/dev/null; }
ppair_kill_postgres() { kill -9 "$(ppair_postmaster "$1")"; }
# The member's whole server dies: Patroni and its postmaster, both -9; its
# leader key then lives on in etcd until its ttl runs out.
ppair_kill_node() {
    local pm; pm=$(ppair_postmaster "$1")
    kill -9 "${PPAIR_PIDS[$1]}"
    kill -9 "$pm"
}

# Everything this file started, even half started: Patroni stops its
# postgres when it is stopped (SIGTERM); what outlives it is stopped
# immediately from the data directory, then etcd goes.
ppair_stop() {
    local n p
    for p in "${PPAIR_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${PPAIR_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$p" 2>/dev/null || true
    done
    for n in 0 1; do
        if [ -n "${PPAIR_DIR:-}" ] && [ -f "$PPAIR_DIR/n$n/postmaster.pid" ]; then
            ppair_as_pg "$PPAIR_BIN/pg_ctl" -D "$PPAIR_DIR/n$n" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
        fi
    done
    if [ -n "${PPAIR_ETCD_PID:-}" ]; then
        kill -TERM "$PPAIR_ETCD_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$PPAIR_ETCD_PID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$PPAIR_ETCD_PID" 2>/dev/null || true
    fi
}
