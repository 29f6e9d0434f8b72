#!/usr/bin/env bash
# The demo's setup path (scripts/demo_db.sh) from a clone inside a 0700
# folder, as a user who clones into /root would run it: the cluster starts
# and migrates; a second run reuses it; a port taken by another program, a
# half-created cluster, a folder the postgres user cannot reach and a full
# disk are refused with a message saying what to do, and nothing is removed.
# As root it also runs the path as an ordinary user (nobody) whose home is
# 0700.  It makes its own clusters on their own ports, never the real demo's.
set -euo pipefail

SRC=${TM_SOURCE_DIR:?run through ctest}
BIN=${TM_BIN:?run through ctest}
WORK=$(mktemp -d /tmp/tarmac-demo-itest.XXXXXX)
chmod 755 "$WORK"          # a place the postgres user may enter, as /var/lib is
MOUNTED=""
HELD=""
cleanup() {
    for d in "$WORK"/state*; do
        [ -d "$d" ] && TARMAC_DEMO_DIR=$d bash "$SRC/scripts/demo_db.sh" stop 2>/dev/null || true
    done
    if [ -d "$WORK/home/.local/state/tarmac/demo/pg" ]; then
        (cd / && runuser -u nobody -- env HOME="$WORK/home" XDG_STATE_HOME= bash "$WORK/home/clone/scripts/demo_db.sh" \
            stop 2>/dev/null) || true
    fi
    [ -n "$HELD" ] && kill "$HELD" 2>/dev/null
    [ -n "$MOUNTED" ] && umount "$MOUNTED" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# A clone inside a private folder (mktemp -d makes it 0700, as /root is).
PRIV=$(mktemp -d /tmp/tarmac-private.XXXXXX)
trap 'cleanup; rm -rf "$PRIV"' EXIT
[ "$(stat -c %a "$PRIV")" = 700 ] || fail "mktemp -d did not make a 0700 folder"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
    git clone -q "$SRC" "$PRIV/clone"
    cp "$SRC/scripts/demo_db.sh" "$PRIV/clone/scripts/"   # the tree under test, committed or not
else
    mkdir -p "$PRIV/clone" && cp -r "$SRC/scripts" "$SRC/config" "$PRIV/clone/"
fi
DEMO_DB="$PRIV/clone/scripts/demo_db.sh"
cd "$PRIV/clone"

# The default folder is outside the checkout, where its owner can reach it.
where=$(bash "$DEMO_DB" where)
case "$where" in "$PRIV"/*) fail "the default cluster folder $where is inside the checkout" ;; esac
if [ "$(id -u)" = 0 ]; then
    [ "$where" = /var/lib/tarmac/demo/pg ] || fail "as root the cluster should live in /var/lib/tarmac/demo, not $where"
fi

# 1. Start and migrate, from the private clone.
export TARMAC_DEMO_DIR=$WORK/state TARMAC_DEMO_PORT
TARMAC_DEMO_PORT=$(free_port)
url=$(bash "$DEMO_DB" start tarmac_demo 2>"$WORK/start.err") || { cat "$WORK/start.err" >&2; fail "start failed"; }
[ "$url" = "postgresql://postgres@127.0.0.1:$TARMAC_DEMO_PORT/tarmac_demo" ] || fail "unexpected URL $url"
TARMAC_DATABASE_URL=$url "$BIN" migrate --config "$PRIV/clone/config/demo.yaml" >"$WORK/migrate.out" 2>&1 ||
    { cat "$WORK/migrate.out" >&2; fail "migrate failed"; }
n=$(psql -X -q -t -A "$url" -c "SELECT count(*) FROM pools")
[ "$n" = 2 ] || fail "the demo's two pools are not in the migrated database ($n)"
[ "$(stat -c %a "$PRIV")" = 700 ] || fail "the private folder's permissions were changed"

# 2. A second run reuses the running cluster, with a fresh database.
psql -X -q "$url" -c "CREATE TABLE leftover (x int)"
url2=$(bash "$DEMO_DB" start tarmac_demo 2>"$WORK/start2.err") || { cat "$WORK/start2.err" >&2; fail "second start failed"; }
[ "$url2" = "$url" ] || fail "second start gave $url2"
grep -q 'creating' "$WORK/start2.err" && fail "second start created the cluster again"
[ -z "$(psql -X -q -t -A "$url" -c "SELECT to_regclass('leftover')")" ] || fail "the database was not fresh"
bash "$DEMO_DB" stop

# 3. After a stop, a start on another port brings the same cluster back.
TARMAC_DEMO_PORT=$(free_port)
url3=$(bash "$DEMO_DB" start tarmac_demo 2>/dev/null) || fail "restart on another port failed"
[ "$url3" = "postgresql://postgres@127.0.0.1:$TARMAC_DEMO_PORT/tarmac_demo" ] || fail "restart gave $url3"
bash "$DEMO_DB" stop

# 4. A port taken by another program: refused, with what to do.
TARMAC_DEMO_PORT=$(free_port)
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$TARMAC_DEMO_PORT)); s.listen(); time.sleep(120)" &
HELD=$!
for _ in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1',$TARMAC_DEMO_PORT))" 2>/dev/null && break; sleep 0.1; done
if bash "$DEMO_DB" start tarmac_demo >/dev/null 2>"$WORK/port.err"; then fail "a taken port was not refused"; fi
grep -q "port $TARMAC_DEMO_PORT .*taken" "$WORK/port.err" || fail "unclear message for a taken port: $(cat "$WORK/port.err")"
grep -q "TARMAC_DEMO_PORT" "$WORK/port.err" || fail "the message does not say how to choose another port"
[ -f "$WORK/state/pg/PG_VERSION" ] || fail "the cluster was touched by a refused start"
kill "$HELD"; HELD=""
# ... and by another PostgreSQL server (the first cluster, started again):
# refused before a second cluster is made.
TARMAC_DEMO_PORT=$(free_port)
bash "$DEMO_DB" start tarmac_demo >/dev/null 2>&1 || fail "the first cluster did not start again"
if TARMAC_DEMO_DIR=$WORK/state-other bash "$DEMO_DB" start tarmac_demo >/dev/null 2>"$WORK/port2.err"; then
    fail "a port taken by another PostgreSQL was not refused"
fi
grep -q "taken by another PostgreSQL server" "$WORK/port2.err" || fail "unclear message: $(cat "$WORK/port2.err")"
[ ! -e "$WORK/state-other/pg" ] || fail "a cluster was created for a taken port"
bash "$DEMO_DB" stop

# 5. A half-created cluster (an earlier run killed during initdb): refused,
# nothing of it removed.
TARMAC_DEMO_PORT=$(free_port)
export TARMAC_DEMO_DIR=$WORK/state-half
mkdir -p "$TARMAC_DEMO_DIR/pg" && : >"$TARMAC_DEMO_DIR/pg.creating"
echo keep >"$TARMAC_DEMO_DIR/pg/base-partial"
if bash "$DEMO_DB" start tarmac_demo >/dev/null 2>"$WORK/half.err"; then fail "a half-created cluster was used"; fi
grep -q "half-created" "$WORK/half.err" || fail "unclear message for a half-created cluster: $(cat "$WORK/half.err")"
grep -q "demo_db.sh remove" "$WORK/half.err" || fail "the message does not say how to remove it"
[ "$(cat "$TARMAC_DEMO_DIR/pg/base-partial")" = keep ] || fail "a refused start removed files"
bash "$DEMO_DB" remove 2>/dev/null
[ ! -e "$TARMAC_DEMO_DIR" ] || fail "remove left $TARMAC_DEMO_DIR"

if [ "$(id -u)" = 0 ]; then
    # 6. As root, a folder the postgres user cannot reach: refused before
    # initdb, the private folder untouched.
    export TARMAC_DEMO_DIR=$PRIV/state
    if bash "$DEMO_DB" start tarmac_demo >/dev/null 2>"$WORK/priv.err"; then fail "an unreachable folder was used"; fi
    grep -q "postgres user.*cannot reach" "$WORK/priv.err" || fail "unclear message: $(cat "$WORK/priv.err")"
    [ ! -e "$PRIV/state" ] || fail "a refused start left $PRIV/state behind"
    [ "$(stat -c %a "$PRIV")" = 700 ] || fail "the private folder's permissions were changed"

    # 7. No space left: a 4 MB disk.
    mkdir "$WORK/tiny" && chmod 755 "$WORK/tiny"
    if mount -t tmpfs -o size=4m,mode=0755 tmpfs "$WORK/tiny" 2>/dev/null; then
        MOUNTED=$WORK/tiny
        export TARMAC_DEMO_DIR=$WORK/tiny/state
        if bash "$DEMO_DB" start tarmac_demo >/dev/null 2>"$WORK/full.err"; then fail "a full disk was not refused"; fi
        grep -q "MB free in .*TARMAC_DEMO_DIR" <(tr '\n' ' ' <"$WORK/full.err") ||
            fail "unclear message for a full disk: $(cat "$WORK/full.err")"
        [ ! -e "$WORK/tiny/state/pg" ] || fail "a refused start left a cluster folder behind"
        umount "$WORK/tiny"; MOUNTED=""
    else
        echo "demo_setup: cannot mount a tmpfs here; the full-disk case is not run" >&2
    fi

    # 8. An ordinary user (nobody) with a 0700 home, cluster in the default
    # place under it: initdb and the server run as that user.
    if id nobody >/dev/null 2>&1; then
        mkdir -m 700 "$WORK/home" && chown nobody: "$WORK/home"
        # A copy of what the setup path needs (nobody may not read $SRC).
        mkdir "$WORK/home/clone" && cp -r "$SRC/scripts" "$SRC/config" "$WORK/home/clone/"
        chown -R nobody: "$WORK/home/clone"
        install -o nobody -m 755 -D "$BIN" "$WORK/home/clone/build/tarmac"
        as_user() { (cd "$WORK/home/clone" && runuser -u nobody -- env -u TARMAC_DEMO_DIR HOME="$WORK/home" \
                     XDG_STATE_HOME= TARMAC_DEMO_PORT="$port" "$@"); }
        port=$(free_port)
        w=$(as_user bash scripts/demo_db.sh where)
        [ "$w" = "$WORK/home/.local/state/tarmac/demo/pg" ] || fail "a user's default cluster folder is $w"
        url=$(as_user bash scripts/demo_db.sh start tarmac_demo 2>"$WORK/user.err") ||
            { cat "$WORK/user.err" >&2; fail "start as an ordinary user failed"; }
        as_user env TARMAC_DATABASE_URL="$url" build/tarmac migrate --config config/demo.yaml >/dev/null ||
            fail "migrate as an ordinary user failed"
        [ "$(psql -X -q -t -A "$url" -c "SELECT count(*) FROM pools")" = 2 ] || fail "user's database not migrated"
        [ "$(stat -c %U "$WORK/home/.local/state/tarmac/demo/pg")" = nobody ] || fail "the user's cluster is not theirs"
        [ "$(stat -c %a "$WORK/home")" = 700 ] || fail "the user's home permissions were changed"
        as_user bash scripts/demo_db.sh remove 2>/dev/null
    fi
fi
echo "demo_setup: all cases passed"
