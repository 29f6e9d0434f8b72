#!/usr/bin/env bash
# Start or stop a throwaway PostgreSQL cluster for the test run.
#
#   pg_cluster.sh start STATE_DIR   # initdb in a fresh temp dir, start on a free port
#   pg_cluster.sh stop STATE_DIR
#
# STATE_DIR/pg.env is written on start: PGHOST, PGPORT, PGUSER and TM_PG_BASE
# (a libpq URL without a database name).  Tests source it, create their own
# database, and drop nothing else.  initdb refuses root, so as root the
# cluster runs as the postgres user (runuser), in a directory it owns.
set -euo pipefail

cmd=${1:?start|stop}
state=${2:?state dir}
mkdir -p "$state"

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -x "$bindir/initdb" ] || { echo "pg_cluster: no PostgreSQL server found under /usr/lib/postgresql" >&2; exit 1; }

as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# A process that exited but was not yet reaped (a zombie) counts as gone.
alive() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [ "${st#Z}" = "$st" ]
}

case "$cmd" in
start)
    if [ -f "$state/pg.env" ]; then
        # A previous run left one behind: stop it first.
        "$0" stop "$state" || true
    fi
    dir=$(mktemp -d /tmp/tarmac-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    as_pg "$bindir/initdb" -D "$dir/data" -A trust -U postgres -N --no-instructions >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 300
shared_buffers = 128MB
log_min_messages = warning
CONF
    as_pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
        || { cat "$dir/server.log" >&2; exit 1; }
    cat >"$state/pg.env" <<ENV
export PGHOST=127.0.0.1
export PGPORT=$port
export PGUSER=postgres
export TM_PG_DIR=$dir
export TM_PG_BASE=postgresql://postgres@127.0.0.1:$port
ENV
    echo "pg_cluster: started on port $port in $dir"
    ;;
stop)
    [ -f "$state/pg.env" ] || exit 0
    # shellcheck disable=SC1091
    . "$state/pg.env"
    # An immediate stop takes a second or two.  One CI run saw pg_ctl wait
    # out its whole minute, so the wait is bounded here: past it, what the
    # server's processes were doing is printed and they are killed.  The
    # cluster is throwaway; the cleanup's job is that nothing outlives it.
    pid=$(head -n 1 "$TM_PG_DIR/data/postmaster.pid" 2>/dev/null || true)
    t0=$SECONDS
    as_pg "$bindir/pg_ctl" -D "$TM_PG_DIR/data" -m immediate -w -t 20 stop >/dev/null 2>&1 || true
    if [ -n "$pid" ] && alive "$pid"; then
        echo "pg_cluster: postmaster $pid still running $((SECONDS - t0)) s after an immediate stop:" >&2
        ps -o pid,ppid,stat,wchan:20,etime,args --ppid "$pid" -p "$pid" >&2 || true
        pkill -KILL -P "$pid" 2>/dev/null || true
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do alive "$pid" || break; sleep 0.2; done
    fi
    t1=$SECONDS
    rm -rf "$TM_PG_DIR" "$state/pg.env"
    echo "pg_cluster: stopped (server $((t1 - t0)) s, removal $((SECONDS - t1)) s)"
    ;;
*)
    echo "usage: pg_cluster.sh start|stop STATE_DIR" >&2
    exit 2
    ;;
esac
