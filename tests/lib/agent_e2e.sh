#!/usr/bin/env bash
# Shared by tests/integration/agent_*.sh: the controller (`tarmac serve`)
# with a `kind: local` provider, so every node is a real `tarmac agent`
# process here running real shell jobs, against the run's PostgreSQL.
# Source it after itest.sh.  Short timeouts throughout (heartbeat 1 s,
# unreachable after 3 s) keep each test to seconds.
#
#   e2e_start NAME [METADATA] [METADATA_URL] [GPU_UTIL] [EXTRA_YAML]
#       a database, the config, `tarmac migrate`, `tarmac serve`, an admin
#       token: sets DB, BASE, ADMIN, STATE (the provider's state_dir), SERVE.
#       E2E_AGENT_YAML and E2E_PROVIDER_YAML: more lines for the agent
#       section (2 spaces in) and the provider (4 spaces); E2E_PROVIDERS_YAML:
#       more providers (entries of the list, 2 spaces in); E2E_OD_MIN and
#       E2E_OD_MAX: the od pool's min_nodes (0) and max_nodes (3);
#       E2E_OD_YAML: more lines for the od pool (4 spaces in)
#       E2E_UNREACHABLE_AFTER, E2E_REQUEUE_AFTER and E2E_TERMINATE_AFTER
#       change the agent timings (3s, 5s, 30s); E2E_SERVE_ARGS is added to
#       `tarmac serve` (e.g. a --database-url through a proxy)
#   e2e_serve              start `tarmac serve` again (after a stop): sets SERVE
#   submit JSON            POST /v1/jobs as admin; prints the job id
#   job_field ID FIELD     a field of GET /v1/jobs/ID
#   wait_job ID STATES [S] until the job's state matches STATES (an ERE such
#                          as 'running|succeeded'; S seconds, default 30)
#   node_of_job ID         the node the job runs on now (from the database)
#   node_dir NODE          the local provider's folder of that node
#   agent_pid NODE         the pid of that node's agent (0 if none)
#   secrets_absent         no enrollment secret or agent token in any log
set -euo pipefail

E2E_AGENT_ARGS=${E2E_AGENT_ARGS:---heartbeat-period 1s --sample-period 1s --kill-grace 2s}

e2e_start() {
    local name=$1 md=${2:-local} mdurl=${3:-} util=${4:-50} extra=${5:-} mdline=
    DB=$(new_db "$name")
    # the nodes' jobs run under users of their own, who pass through the
    # folders above their own (and the pools' checkpoint_dir)
    chmod 711 "$WORK"
    STATE=$WORK/local
    PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    BASE=http://127.0.0.1:$PORT
    [ -z "$mdurl" ] || mdline="    metadata_url: \"$mdurl\""
    cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: e2e
listen: "127.0.0.1:$PORT"
tick_interval: 300ms
log_level: info
scheduler:
  policy: fifo
api:
  rate_per_token: 100000
  burst: 1000000
agent:
  controller_url: "$BASE"
  unreachable_after: ${E2E_UNREACHABLE_AFTER:-3s}
  requeue_after: ${E2E_REQUEUE_AFTER:-5s}
  terminate_after: ${E2E_TERMINATE_AFTER:-30s}
  boot_allowance: 20s
${E2E_AGENT_YAML:-}
providers:
  - name: here
    kind: local
    region: local
    state_dir: "$STATE"
    metadata: $md
$mdline
    gpu_util_percent: $util
    agent_args: "$E2E_AGENT_ARGS"
${E2E_PROVIDER_YAML:-}
    instance_types:
      - name: local.2x
        gpus: 2
        gpu_model: A100
        cpu_milli: 8000
        memory_mib: 16384
        on_demand_price: "2.00"
        spot_price: "0.60"
${E2E_PROVIDERS_YAML:-}
pools:
  - name: od
    provider: here
    zones: [local-a]
    instance_types: [local.2x]
    capacity_type: on_demand
    min_nodes: ${E2E_OD_MIN:-0}
    max_nodes: ${E2E_OD_MAX:-3}
    idle_grace: ${E2E_IDLE_GRACE:-2s}
    bootstrap: "$TM_SOURCE_DIR/config/bootstrap-local.sh"
    checkpoint_dir: "$WORK/ckpt"
${E2E_OD_YAML:-}
  - name: spot
    provider: here
    zones: [local-a]
    instance_types: [local.2x]
    capacity_type: spot
    min_nodes: 0
    # E2E_SPOT_MAX: the spot pool's max_nodes (3)
    max_nodes: ${E2E_SPOT_MAX:-3}
    idle_grace: ${E2E_IDLE_GRACE:-2s}
    bootstrap: "$TM_SOURCE_DIR/config/bootstrap-local.sh"
    checkpoint_dir: "$WORK/ckpt"
$extra
YAML
    "$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
    ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name e2e-admin --role admin 2>>"$WORK/token.log") \
        || fail "token create"
    e2e_serve
    trap 'e2e_cleanup; cleanup' EXIT
    trap 'exit 143' TERM INT HUP
}

e2e_serve() {
    local led
    led=$(grep -c 'became leader' "$WORK/serve.log" 2>/dev/null || true)
    # shellcheck disable=SC2086
    "$TARMAC" serve --config "$WORK/c.yaml" ${E2E_SERVE_ARGS:-} >>"$WORK/serve.out" 2>>"$WORK/serve.log" &
    SERVE=$!
    PIDS+=("$SERVE")
    wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"
    wait_for 30 "[ \"\$(grep -c 'became leader' $WORK/serve.log)\" -gt ${led:-0} ]" \
        || fail "the controller never became leader"
}

# Every process of every local node goes with the test, by the marker the
# provider puts in their environment (their pids, found in /proc).
e2e_cleanup() {
    [ -n "${SERVE:-}" ] && kill -9 "$SERVE" 2>/dev/null || true
    python3 - "TM_LOCAL_NODE_DIR=$STATE/" <<'PY' || true
import os, signal, sys
mark = sys.argv[1].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        if any(e.startswith(mark) for e in env):
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
PY
}

# api METHOD PATH [BODY]: prints the body; fails on a non-2xx status.
api() {
    curl -fsS -X "$1" -H "Authorization: Bearer $ADMIN" \
        ${3:+-H 'Content-Type: application/json' --data "$3"} "$BASE$2"
}

submit() {
    local out
    out=$(api POST /v1/jobs "$1") || fail "could not submit $1"
    python3 -c 'import json,sys; print(json.loads(sys.argv[1])["id"])' "$out"
}

job_field() {
    api GET "/v1/jobs/$1" | python3 -c 'import json,sys; v = json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$2"
}

wait_job() {
    local limit=${3:-30}
    wait_for "$limit" "psql_q \"SELECT state FROM jobs WHERE id = $1\" | grep -qxE '$2'" \
        || fail "job $1 not $2 after ${limit}s: $(psql_q "SELECT state, attempts, node_id, exit_code FROM jobs WHERE id = $1")"
}

node_of_job() { psql_q "SELECT coalesce(node_id, 0) FROM jobs WHERE id = $1"; }

node_dir() {
    local d
    for d in "$STATE"/nodes/local-"$1"-*; do [ -d "$d" ] && { echo "$d"; return 0; }; done
    fail "node $1 has no folder in $STATE/nodes"
}

# The pid of the node's agent (argv[1] "agent", the node's marker in its
# environment: the first one or a restarted one), 0 when none runs.
agent_pid() {
    local d
    d=$(node_dir "$1")
    python3 - "$d" <<'PY'
import os, sys
mark = ("TM_LOCAL_NODE_DIR=" + sys.argv[1]).encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        argv = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
        if len(argv) < 2 or argv[1] != b"agent":
            continue
        if mark not in open("/proc/%s/environ" % pid, "rb").read().split(b"\0"):
            continue
        if "\nState:\tZ" in open("/proc/%s/status" % pid).read():
            continue
    except OSError:
        continue
    print(pid)
    sys.exit(0)
print(0)
PY
}

# Restart a node's agent as the provider started it (its agent.env, its
# bootstrap, a session of its own); it has its token, so no enrollment.
restart_agent() {
    local d
    d=$(node_dir "$1")
    ( cd "$d" && setsid /bin/sh -c '. ./agent.env && exec /bin/sh ./bootstrap.sh' \
        >>"$d/agent.log" 2>&1 </dev/null & )
}

secrets_absent() {
    local s f
    for f in "$STATE"/nodes/*/work/token; do
        [ -f "$f" ] || continue
        s=$(cat "$f")
        grep -rqF -- "$s" "$WORK"/*.log "$WORK/serve.out" "$STATE"/nodes/*/agent.log "$STATE"/nodes/*/work/jobs/ 2>/dev/null \
            && fail "an agent token reached a log"
    done
    for f in "$STATE"/nodes/*/work/enroll.secret; do
        [ -f "$f" ] || continue
        s=$(cat "$f")
        [ -n "$s" ] || continue
        grep -rqF -- "$s" "$WORK"/*.log "$WORK/serve.out" "$STATE"/nodes/*/agent.log "$STATE"/nodes/*/work/jobs/ 2>/dev/null \
            && fail "an enrollment secret reached a log"
        [ "$(psql_q "SELECT count(*) FROM decisions WHERE reason LIKE '%$s%' OR inputs::text LIKE '%$s%'")" = 0 ] \
            || fail "an enrollment secret reached the decisions"
    done
    return 0
}
