#!/usr/bin/env bash
# A gang bought whole on the Azure fake (no all-or-nothing call for single
# VMs): a job on 2 nodes, zone 1 with room for one VM only.  The first VM is
# made, the second refused (ZonalAllocationFailed): the set is released
# whole (the made VM deleted, nothing billed), recorded as one decision, the
# shortage remembered; the next pass buys the whole set in zone 2 and the
# gang runs there on both nodes.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

DB=$(new_db itest_gang_azure)
write_azure_config "$WORK/c.yaml" gang 3 1s 300ms '["1", "2"]' '["1", "2"]'
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
az_ctl '{"capacity": {"Standard_ND96amsr_A100_v4/1/Regular": 1}, "short_mode": "sync"}'
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/gang.out" 2>"$WORK/gang.log" || fail "serve failed: $(tail -5 "$WORK/gang.log")"

[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
# One decision for the refused set, naming both of its nodes.
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'pool' AND subject_id = 'od' AND inputs ? 'launch_set'")" = 1 ] \
    || fail "want one launch_failed decision for the set: $(psql_q "SELECT kind, subject_kind, subject_id, reason FROM decisions WHERE kind LIKE 'launch%'")"
[ "$(psql_q "SELECT jsonb_array_length(inputs -> 'nodes') FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'pool'")" = 2 ] \
    || fail "the set's decision should name 2 nodes"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'node'")" = 0 ] \
    || fail "members recorded one by one"
# The refused set: two rows in zone 1, given up, never billed, no instance kept.
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = '1' AND state = 'terminated' AND billed_from_ms IS NULL AND instance_id IS NULL")" = 2 ] \
    || fail "zone 1 set not given up whole: $(psql_q 'SELECT id, zone, state, instance_id, billed_from_ms FROM nodes')"
# The set bought in zone 2, whole.
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = '2' AND billed_from_ms IS NOT NULL")" = 2 ] \
    || fail "zone 2 set not bought: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM nodes")" = 4 ] || fail "want 4 node rows: $(psql_q 'SELECT id, zone, state FROM nodes')"
grep -q 'msg="launch set short, releasing it whole" members=2 made=1' "$WORK/gang.log" \
    || fail "the made member was not released"
grep -q 'msg="launch set refused for capacity".*nodes=2 provider=azure .*zone=1' "$WORK/gang.log" \
    || fail "no capacity refusal logged for the set"
grep -q 'msg="azure capacity short, remembered".*zone=1 market=on_demand' "$WORK/gang.log" \
    || fail "no shortage remembered for zone 1"
sleep 1
check_azure gang idle
counts=$(az_state | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c.get("vm_created",0), c.get("vm_deleted",0))')
echo "gang of 2: zone 1 short after one VM, released whole (one decision), bought whole in zone 2; VMs created/deleted: $counts"

check_violations
check_no_secrets
echo "1 passed, 0 failed"
