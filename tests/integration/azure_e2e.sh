#!/usr/bin/env bash
# The controller end to end against the Azure fake (HTTPS, every request
# checked against the swagger extract):
#  1. `tarmac check azure` exit codes (0 ok, 3 authentication, 1 other);
#  2. jobs for an on-demand and a spot pool: VMs appear with the right size,
#     priority, tags and zone; jobs run (sim agent); VMs, their NICs and
#     disks are deleted after the idle grace;
#  3. no request the real API would refuse; the client secret and every
#     token the fake issued appear in no log line or decision.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

# ---- 1. tarmac check azure -----------------------------------------------
DB=postgresql://unused@127.0.0.1:1/unused
write_azure_config "$WORK/check.yaml" check
rc=0
"$TARMAC" check azure --config "$WORK/check.yaml" >"$WORK/check.out" 2>"$WORK/check.log" || rc=$?
[ "$rc" = 0 ] || fail "check azure: exit $rc"
grep -q '^Standard_ND96amsr_A100_v4 zones=1,2,3$' "$WORK/check.out" || fail "check azure output: $(cat "$WORK/check.out")"
rc=0
AZURE_CLIENT_SECRET=not-the-secret "$TARMAC" check azure --config "$WORK/check.yaml" \
    >/dev/null 2>"$WORK/check-auth.log" || rc=$?
[ "$rc" = 3 ] || fail "check azure with a wrong secret: exit $rc"
grep -q 'authentication failed' "$WORK/check-auth.log" || fail "check azure did not say why"
rc=0
env -u AZURE_CLIENT_SECRET "$TARMAC" check azure --config "$WORK/check.yaml" \
    >/dev/null 2>"$WORK/check-nosecret.log" || rc=$?
[ "$rc" = 3 ] || fail "check azure without a secret: exit $rc"
rc=0
"$TARMAC" check azure --config "$WORK/check.yaml" --vm-sizes Standard_Bogus_v9 >/dev/null \
    2>>"$WORK/check.log" || rc=$?
[ "$rc" = 1 ] || fail "check azure with an unknown size: exit $rc"
grep -q 'Standard_Bogus_v9 is unknown' "$WORK/check.log" || fail "check azure did not name the size"
echo "check azure: exit codes 0/3/1 as documented"

# ---- 2. end to end -------------------------------------------------------
DB=$(new_db itest_azure_e2e)
write_azure_config "$WORK/c.yaml" e2e 3 2s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 6s --count 2 >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --runtime 5s --count 2 --preemptible >/dev/null
submitted=$(psql_q 'SELECT count(*) FROM jobs')
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 3s \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"
az_vms e2e >"$WORK/e2e-vms.txt"
cat "$WORK/e2e-vms.txt"
[ "$(psql_q 'SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL')" -ge 2 ] \
    || fail "no VMs launched: $(psql_q 'SELECT id, state FROM nodes')"
while IFS='|' read -r id pool capacity token; do
    line=$(grep "^$(psql_q "SELECT instance_id FROM nodes WHERE id = $id") " "$WORK/e2e-vms.txt") \
        || fail "node $id: no VM in the fake"
    set -- $line
    [ "$1" = "tm-e2e-$id" ] || fail "node $id: VM name $1"
    [ "$2" = Standard_ND96amsr_A100_v4 ] || fail "node $id: size $2"
    want=Regular; [ "$capacity" = spot ] && want=Spot
    [ "$3" = "$want" ] || fail "node $id ($capacity): priority $3"
    [ "$5" = "$token" ] || fail "node $id: token tag $5, row $token"
    [ "$6" = "$pool" ] || fail "node $id: pool tag $6, row $pool"
    [ "$7" = "$id" ] || fail "node $id: node tag $7"
done < <(psql_q "SELECT id, pool, capacity_type, launch_token FROM nodes WHERE instance_id IS NOT NULL")
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'spot' AND capacity_type = 'spot'")" -ge 1 ] \
    || fail "no spot node for the preemptible work"
check_azure e2e
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 50s \
    >>"$WORK/serve.out" 2>>"$WORK/serve.log" || fail "serve failed"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "jobs not all succeeded: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] \
    || fail "nodes left: $(psql_q 'SELECT id, state FROM nodes')"
sleep 1
check_azure e2e idle
echo "end to end: $submitted jobs succeeded on $(psql_q 'SELECT count(*) FROM nodes') azure nodes, all released with their NICs and disks"
check_violations
check_no_secrets
echo "1 passed, 0 failed"
