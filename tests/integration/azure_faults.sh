#!/usr/bin/env bash
# Azure faults end to end, against the fake:
#  1. a zone short (ZonalAllocationFailed from the async operation, the
#     Failed VM left behind as Azure does): the launch falls back to the
#     pool's next zone, the failed VM is deleted, nothing is left billing;
#     with throttling (429 + Retry-After) and a 503 on the way;
#  2. a spot VM evicted (simulateEviction, evictionPolicy Delete): its node
#     becomes interrupted, the job is requeued and finishes on a new node.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

# ---- 1. zone short, throttling, 5xx ---------------------------------------
DB=$(new_db itest_azure_faults)
write_azure_config "$WORK/c.yaml" faults 2 1s 300ms '["1", "2"]' '["1", "2"]'
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
az_ctl '{"capacity": {"Standard_ND96amsr_A100_v4/1/Regular": 0}, "short_mode": "async", "throttle": 2, "fail5xx": 1}'
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 2s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/zone.out" 2>"$WORK/zone.log" || fail "serve failed"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = 1 ] \
    || fail "job did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
grep -q 'msg="azure capacity short, remembered".*zone=1 market=on_demand code=ZonalAllocationFailed' "$WORK/zone.log" \
    || fail "no shortage remembered for zone 1"
ran=$(sed -n 's/.*msg="job finished" job=1 node=\([0-9]*\) .*/\1/p' "$WORK/zone.log")
[ "$(psql_q "SELECT zone FROM nodes WHERE id = ${ran:-0}")" = 2 ] \
    || fail "the job's node should be in zone 2: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
sleep 1
check_azure faults idle
counts=$(az_state | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c.get("vm_created",0), c.get("vm_deleted",0))')
echo "zone 1 short: fell back to zone 2; VMs created/deleted in the fake: $counts; throttled twice and a 503 on the way"

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
