#!/usr/bin/env bash
# A zone short (ZonalAllocationFailed from the async operation, the Failed VM
# left behind as Azure does), against the Azure fake: the launch falls back
# to the pool's next zone, the failed VM is deleted, nothing is left billing;
# with throttling (429 + Retry-After) and a 503 on the way.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

# ---- 1. zone short, throttling, 5xx ---------------------------------------
DB=$(new_db itest_azure_zone)
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

check_violations
check_no_secrets
echo "1 passed, 0 failed"
