#!/usr/bin/env bash
# docs/openapi.yaml as a contract against the real `tarmac serve`:
# tests/lib/openapi_check.py drives every operation of the file (valid
# requests, bad bodies, unknown path parameters, wrong methods, ended
# nodes) and checks each answer's status and body against the file, the
# checker's NEW_BEHAVIOUR set included (TM_OPENAPI_SKIP_NEW=1 leaves it
# out, for a server older than those answers).
#
# Deterministic: the pools may launch nothing (max_nodes 0), and this
# script holds the leader lock, so the replica under test only serves the
# API and never reconciles the nodes written here.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

python3 -c 'import yaml, jsonschema' 2>/dev/null || fail "python3 yaml and jsonschema are needed (scripts/setup.sh)"
DB=$(new_db itest_api_contract)
write_config "$WORK/c.yaml" 0 2s 1s 300ms
MAX_BODY=262144
cat >>"$WORK/c.yaml" <<YAML
api:
  max_body_bytes: $MAX_BODY
  rate_per_token: 100000
  burst: 1000000
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"

# The leader lock (controller/store.c, TM_LEADER_LOCK_KEY), held for the
# whole run by a session of our own.
psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" -c "SELECT pg_sleep(170)" \
    >/dev/null 2>&1 &
PIDS+=("$!")
wait_for 10 '[ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = '"'advisory'"' AND granted")" -ge 1 ]' \
    || fail "could not take the leader lock"

mint() {
    "$TARMAC" token create --config "$WORK/c.yaml" --name "$1" --role "$2" ${3:+--team "$3"} \
        2>>"$WORK/token.log"
}
ADMIN=$(mint c-admin admin) || fail "token create"
FIN=$(mint c-fin finance) || fail "token create"
ENG=$(mint c-eng engineer vision) || fail "token create"
VIEW=$(mint c-view viewer) || fail "token create"
OTHER=$(mint c-other engineer speech) || fail "token create"
REVOKED=$(mint c-revoked admin) || fail "token create"
"$TARMAC" token revoke --config "$WORK/c.yaml" --name c-revoked >/dev/null 2>>"$WORK/token.log" \
    || fail "token revoke"

node() { # node STATE INSTANCE: a node row of pool od; prints its id
    psql_q "INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
              cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms,
              billed_from_ms, ready_ms, terminated_ms)
            VALUES ('od', 'tok-$2', 'i-$2', 'sim-1a', 'sim.8x', 8, 'A100', 96000, 1000000,
              'on_demand', '$1', 32770000, 1, 1, 2,
              CASE WHEN '$1' IN ('terminated', 'interrupted') THEN 3 END) RETURNING id" | head -n 1
}
NODE=$(node ready c1)
ENDED1=$(node terminated c2)
ENDED2=$(node interrupted c3)
OTHERNODE=$(node ready c4)
# Agent tokens come from enrollment: a secret's hash stored as the daemon
# stores it, traded once the server runs.
S_AGENT=tme_$(openssl rand -hex 32)
S_OTHER=tme_$(openssl rand -hex 32)
for pair in "$NODE:$S_AGENT" "$OTHERNODE:$S_OTHER"; do
    psql_q "INSERT INTO agent_enrollments (node_id, hash, created_ms, expires_ms)
            VALUES (${pair%%:*}, '$(printf '%s' "${pair#*:}" | sha256sum | cut -d' ' -f1)', 1,
                    9000000000000)" >/dev/null
done

# The server's own route table, wherever the file holding it now lives.
ROUTES_SRC=$(grep -rl --include='*.c' 'const struct api_route api_routes\[\]' "$TM_SOURCE_DIR/controller") \
    || fail "no route table found under controller/"
sed -n '/const struct api_route api_routes\[\]/,/^};/p' $ROUTES_SRC \
    | sed -n 's/^ *{"\([A-Z]*\)", "\([^"]*\)".*/\1 \2/p' >"$WORK/routes.txt"
[ -s "$WORK/routes.txt" ] || fail "could not read the route table in $ROUTES_SRC"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" \
    >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"

enroll() { # NODE SECRET: prints the agent token
    curl -fsS -H 'Content-Type: application/json' --data "{\"node_id\":$1,\"secret\":\"$2\"}" \
        "$BASE/v1/agent/enroll" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
AGENT=$(enroll "$NODE" "$S_AGENT") || fail "enroll"
AGENT_OTHER=$(enroll "$OTHERNODE" "$S_OTHER") || fail "enroll"
cat >"$WORK/fixture.json" <<JSON
{"tokens": {"admin": "$ADMIN", "finance": "$FIN", "engineer": "$ENG", "viewer": "$VIEW",
            "engineer_other": "$OTHER", "revoked": "$REVOKED", "agent": "$AGENT",
            "agent_other": "$AGENT_OTHER"},
 "team": "vision", "other_team": "speech", "node_id": $NODE, "pool": "od",
 "ended_node_ids": [$ENDED1, $ENDED2], "max_body_bytes": $MAX_BODY}
JSON
rc=0
timeout 120 python3 "$TM_SOURCE_DIR/tests/lib/openapi_check.py" --spec "$TM_SOURCE_DIR/docs/openapi.yaml" \
    --base "$BASE" --fixture "$WORK/fixture.json" --routes "$WORK/routes.txt" || rc=$?
grep -q 'became leader' "$WORK/serve.log" && fail "the replica under test became leader"
# Let the lock go now rather than when the sleep ends.
psql_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()
          AND query LIKE '%pg_sleep%'" >/dev/null || true
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
[ "$rc" = 0 ] || fail "the contract does not hold (openapi_check.py exited $rc)"
echo "1 passed, 0 failed"
