#!/usr/bin/env bash
# The daemon's side of a node's bootstrap and the bounded sample table,
# against the real `tarmac serve` on the sim cloud:
#   - a pool with `bootstrap: FILE` gets, per launch, an enrollment row
#     (hash only, expiring agent.enroll_ttl after it was made) before the
#     node is launched;
#   - no enrollment secret ("tme_...") reaches any log, the decisions, the
#     `tarmac nodes` output or the API;
#   - a template that could pass EC2's 16 KB of user data is refused at
#     config load, naming the key;
#   - gpu_samples older than agent.sample_retention, or dated past
#     agent.clock_skew ahead, are pruned by the leader's tick (fresh ones
#     stay).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_agent_bootstrap)
printf '#!/bin/sh\n# node {{node_id}} of {{pool}}\nexec tarmac agent --controller {{controller_url}} --node-id {{node_id}} --work-dir /var/lib/tarmac\n# TARMAC_ENROLL_SECRET={{enroll_secret}}\n' \
    >"$WORK/bootstrap.sh"
write_config "$WORK/c.yaml" 1 60s 300ms 300ms
python3 - "$WORK/c.yaml" "$WORK/bootstrap.sh" <<'PY'
import sys
p, tmpl = sys.argv[1], sys.argv[2]
s = open(p).read()
s = s.replace("  - name: od\n    provider: sim\n", "  - name: od\n    provider: sim\n    bootstrap: %s\n" % tmpl, 1)
s = s.replace("    min_nodes: 0\n", "    min_nodes: 1\n", 1)
s += "agent:\n  controller_url: http://127.0.0.1:9\n  enroll_ttl: 30m\n  sample_retention: 1m\n"
open(p, "w").write(s)
PY
# Too big for EC2's user data once filled and base64-encoded: refused at load.
head -c 13000 /dev/zero | tr '\0' x >"$WORK/big.sh"
sed "s|bootstrap: $WORK/bootstrap.sh|bootstrap: $WORK/big.sh|" "$WORK/c.yaml" >"$WORK/big.yaml"
if "$TARMAC" migrate --config "$WORK/big.yaml" >"$WORK/big.out" 2>&1; then
    fail "a 13 KB template was accepted"
fi
grep -q 'pools\[0\].bootstrap' "$WORK/big.out" || fail "the refusal does not name the key: $(cat "$WORK/big.out")"

"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name b-admin --role admin 2>>"$WORK/token.log") \
    || fail "token create"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
SERVE=$!
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"

# The pool's min_nodes launches a node: its enrollment row came first.
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = '"'od'"' AND instance_id IS NOT NULL")" -ge 1 ]' \
    || fail "no node launched"
NODE=$(psql_q "SELECT id FROM nodes WHERE pool = 'od' ORDER BY id LIMIT 1")
[ "$(psql_q "SELECT count(*) FROM agent_enrollments WHERE node_id = $NODE AND used_ms IS NULL
             AND expires_ms - created_ms = 1800000 AND hash ~ '^[0-9a-f]{64}$'")" = 1 ] \
    || fail "no enrollment row for node $NODE: $(psql_q "SELECT * FROM agent_enrollments")"

# Pruning: 25,000 samples of long ago, and 12,000 dated in 2100 and 9999
# (stored before the API refused such times), go in a few ticks; the
# fresh one stays.
psql_q "INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)
        SELECT $NODE, g % 8, 1000 + g, 50, 1 FROM generate_series(1, 25000) g" >/dev/null
psql_q "INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)
        SELECT $NODE, g % 8, CASE WHEN g % 2 = 0 THEN 4102444800000 ELSE 253402300799000 END + g, 50, 1
        FROM generate_series(1, 12000) g" >/dev/null
psql_q "INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)
        VALUES ($NODE, 0, $(date +%s%3N), 10, 1)" >/dev/null
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM gpu_samples")" = 1 ]' \
    || fail "old samples were not pruned: $(psql_q "SELECT count(*) FROM gpu_samples") left"

# No secret anywhere a person or a client reads.
TARMAC_TOKEN=$ADMIN "$TARMAC" nodes --all --url "$BASE" >"$WORK/nodes.out" 2>&1 || fail "tarmac nodes"
curl -fsS -H "Authorization: Bearer $ADMIN" "$BASE/v1/nodes?limit=100" >"$WORK/api_nodes.out" || fail "GET /v1/nodes"
curl -fsS -H "Authorization: Bearer $ADMIN" "$BASE/v1/decisions?limit=1000" >"$WORK/api_decisions.out" \
    || fail "GET /v1/decisions"
psql_q "SELECT kind, reason, inputs FROM decisions" >"$WORK/decisions.out"
for f in "$WORK"/*.log "$WORK"/*.out; do
    if grep -q 'tme_' "$f"; then fail "an enrollment secret reached $f"; fi
done
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
for f in "$WORK"/*.log "$WORK"/*.out; do
    if grep -q 'tme_' "$f"; then fail "an enrollment secret reached $f"; fi
done
echo "1 passed, 0 failed"
