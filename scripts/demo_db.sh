#!/usr/bin/env bash
# The demo's own PostgreSQL cluster: where it lives, creating it once,
# starting it, a fresh database for each run, and removing it.
#
#   scripts/demo_db.sh where           # print the cluster's folder
#   scripts/demo_db.sh start DBNAME    # create (once) and start it, (re)create
#                                      # DBNAME, print its libpq URL on stdout
#   scripts/demo_db.sh stop            # stop the server, keep the cluster
#   scripts/demo_db.sh remove          # stop it and delete the cluster
#
# The cluster is not kept in the checkout: as root, initdb and the server run
# as the postgres user, who cannot enter a clone under /root or in any 0700
# folder, and the permissions of the user's own folders are not ours to
# loosen.  So it lives where its owner can reach it:
#   as root:      /var/lib/tarmac/demo           (postgres owns pg/ inside it)
#   as a user:    ${XDG_STATE_HOME:-~/.local/state}/tarmac/demo (the user runs it)
# TARMAC_DEMO_DIR names another folder; TARMAC_DEMO_PORT another port
# (default 55432, on 127.0.0.1 only).  Every refusal says what to do, exits 1
# and removes nothing that this script did not create in the same run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
port=${TARMAC_DEMO_PORT:-55432}
need_mb=128   # initdb writes about 40 MB; the demo's database grows to ~60 MB

if [ "$(id -u)" = 0 ]; then
    default_dir=/var/lib/tarmac/demo
else
    default_dir=${XDG_STATE_HOME:-$HOME/.local/state}/tarmac/demo
fi
dir=${TARMAC_DEMO_DIR:-$default_dir}
data=$dir/pg
creating=$dir/pg.creating   # present while initdb runs: a crash leaves it behind

say() { echo "demo: $*" >&2; }
made_dir=""  # set when this run made $dir: a refusal then takes it away again, if empty
die() {
    say "$*"
    [ -n "$made_dir" ] && rmdir "$dir" 2>/dev/null
    exit 1
}

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
pg_bin() { echo "$bindir/$1"; }
need_server() {
    [ -n "$bindir" ] && [ -x "$bindir/initdb" ] ||
        die "no PostgreSQL server found under /usr/lib/postgresql (run bash scripts/setup.sh first)"
}

# As root the cluster belongs to the postgres user; run its tools from / so
# that a working directory postgres cannot enter is no error.
as_owner() {
    if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

running_port() { # the port of our server if it runs, else nothing
    [ -f "$data/postmaster.pid" ] || return 0
    as_owner "$(pg_bin pg_ctl)" -D "$data" status >/dev/null 2>&1 || return 0
    sed -n 4p "$data/postmaster.pid"
}

port_free() {
    python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}

check_port() {
    port_free "$port" && return 0
    if "$(pg_bin pg_isready)" -q -h 127.0.0.1 -p "$port" >/dev/null 2>&1; then
        die "port $port on 127.0.0.1 is taken by another PostgreSQL server, not the demo's." \
            "Set TARMAC_DEMO_PORT to a free port, or TARMAC_DATABASE_URL to use that server."
    fi
    die "port $port on 127.0.0.1 is taken by another program. Set TARMAC_DEMO_PORT to a free port."
}

check_space() { # folder
    local avail_kb
    avail_kb=$(df -Pk "$1" | awk 'NR == 2 { print $4 }')
    [ -n "$avail_kb" ] && [ "$avail_kb" -ge $((need_mb * 1024)) ] && return 0
    die "only $((${avail_kb:-0} / 1024)) MB free in $1; the demo's cluster needs about $need_mb MB." \
        "Free some space there, or set TARMAC_DEMO_DIR to a folder on another disk."
}

make_dir() {
    [ -d "$dir" ] || made_dir=yes
    if [ -z "${TARMAC_DEMO_DIR:-}" ] && [ "$(id -u)" = 0 ]; then
        # Our own folders: each made traversable for the postgres user.
        install -d -m 0755 /var/lib/tarmac "$dir"
    else
        mkdir -p "$dir" 2>/dev/null || die "cannot create $dir; set TARMAC_DEMO_DIR to a folder you can write"
    fi
    [ -w "$dir" ] || die "cannot write to $dir; set TARMAC_DEMO_DIR to a folder you can write"
    if [ "$(id -u)" = 0 ] && ! (cd / && runuser -u postgres -- test -x "$dir"); then
        die "the postgres user, who runs the server, cannot reach $dir (a folder above it is" \
            "private, as /root is). Set TARMAC_DEMO_DIR to a folder outside it, such as $default_dir."
    fi
}

create() {
    check_space "$dir"
    say "creating a PostgreSQL cluster in $data"
    : >"$creating"
    mkdir "$data"
    [ "$(id -u)" = 0 ] && chown postgres: "$data"
    if ! as_owner "$(pg_bin initdb)" -D "$data" -A trust -U postgres --no-instructions \
        >"$dir/initdb.log" 2>&1; then
        tail -n 5 "$dir/initdb.log" >&2
        # initdb empties the folder it was given; what is left is ours.
        rmdir "$data" 2>/dev/null || true
        rm -f "$creating"
        die "initdb failed in $data (above; full log $dir/initdb.log)." \
            "If the disk is full, free space there or set TARMAC_DEMO_DIR to another folder."
    fi
    # The port is given at each start, so TARMAC_DEMO_PORT can change.
    printf "listen_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n" "$data" >>"$data/postgresql.conf"
    rm -f "$creating"
}

start() {
    local db=${1:?database name} p
    make_dir
    if [ -e "$creating" ] || { [ -e "$data" ] && [ ! -f "$data/PG_VERSION" ]; }; then
        die "$data holds a half-created cluster, left by an interrupted earlier run." \
            "Remove it with: bash $here/demo_db.sh remove   (or rm -rf $data $creating), then run again."
    fi
    # A taken port is said before initdb, not after a cluster was made for it.
    [ -f "$data/PG_VERSION" ] || { check_port; create; }
    p=$(running_port)
    if [ -z "$p" ]; then
        check_port
        if ! as_owner "$(pg_bin pg_ctl)" -D "$data" -l "$data/server.log" -o "-p $port" -w -t 60 \
            start >/dev/null 2>&1; then
            tail -n 5 "$data/server.log" >&2 2>/dev/null || true
            die "the PostgreSQL server in $data did not start (its log above: $data/server.log)."
        fi
        p=$port
    fi
    # A fresh database each run, so the summary is this run's.
    PGOPTIONS="-c client_min_messages=warning" "$(pg_bin psql)" -q -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$p" -U postgres -d postgres \
        -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" -c "CREATE DATABASE \"$db\"" >/dev/null ||
        die "could not create database $db on port $p"
    echo "postgresql://postgres@127.0.0.1:$p/$db"
}

stop() {
    [ -f "$data/postmaster.pid" ] || return 0
    as_owner "$(pg_bin pg_ctl)" -D "$data" -w stop >/dev/null 2>&1 || true
}

remove() {
    stop
    rm -rf "$data" "$creating" "$dir/initdb.log"
    rmdir "$dir" 2>/dev/null || true
    say "removed the demo's cluster in $data"
}

case "${1:-}" in
where) echo "$data" ;;
start) need_server; start "${2:-}" ;;
stop) need_server; stop ;;
remove) need_server; remove ;;
*)
    echo "usage: demo_db.sh where | start DBNAME | stop | remove" >&2
    exit 2
    ;;
esac
