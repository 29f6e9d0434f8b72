#!/usr/bin/env bash
# A spot VM evicted (simulateEviction, evictionPolicy Delete), against the
# Azure fake: its node becomes interrupted, the job is requeued and finishes
# on a new node, nothing is left billing.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

# ---- 2. eviction ----------------------------------------------------------
DB=$(new_db itest_azure_evict)
write_azure_config "$WORK/e.yaml" evict 2 1s 300ms '["1"]' '["1"]'
"$TARMAC" migrate --config "$WORK/e.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/e.yaml" --team b --gpus 8 --runtime 6s --preemptible >/dev/null
"$TARMAC" serve --config "$WORK/e.yaml" --exit-when-idle --max-wall 45s \
    >"$WORK/evict.out" 2>"$WORK/evict.log" &
pid=$!; PIDS+=("$pid")
wait_for 20 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'"'running'"'"'")" = 1 ]' \
    || fail "the job never ran: $(psql_q 'SELECT id, state FROM jobs')"
vm=$(psql_q "SELECT instance_id FROM nodes WHERE state = 'ready' LIMIT 1")
[ -n "$vm" ] || fail "no ready node"
code=$(az_evict "$vm")
[ "$code" = 204 ] || fail "simulateEviction answered $code"
echo "evicted $vm"
wait "$pid" || fail "serve failed after the eviction"
[ "$(psql_q "SELECT state FROM nodes WHERE instance_id = '$vm'")" = interrupted ] \
    || fail "the evicted node is not interrupted: $(psql_q 'SELECT id, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = 1 ] \
    || fail "the requeued job did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM nodes")" -ge 2 ] || { grep -E "decision|evict|job|requeue" "$WORK/evict.log" | cut -c1-220 | tail -30; fail "no second node for the requeued job"; }
grep -q 'msg="decision" op=node_gone.*reclaimed by the cloud\|msg="azure spot vm evicted"' "$WORK/evict.log" \
    || fail "the eviction was not reported as such"
sleep 1
check_azure evict idle
echo "eviction: node of $vm interrupted, job requeued and succeeded on node $(psql_q "SELECT max(id) FROM nodes")"
check_violations
check_no_secrets
echo "1 passed, 0 failed"
