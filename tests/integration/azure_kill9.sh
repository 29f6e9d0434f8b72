#!/usr/bin/env bash
# kill -9 of the controller at random points while it launches and deletes
# Azure VMs (the fake holds each PUT 0.25 s before and after it makes the VM,
# and deletes take 0.3 s), then a restart: zero duplicate VMs, zero orphans
# (VMs, NICs and OS disks), zero lost jobs.
#
#   KILLS=50 tests/integration/azure_kill9.sh     # the soak (docs/benchmarks.md)
# The suite runs KILLS=6 plus the two fixed crash points.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

kills=${KILLS:-6}
DB=$(new_db itest_azure_kill9)
write_azure_config "$WORK/k.yaml" kill9 40 1s 200ms
"$TARMAC" migrate --config "$WORK/k.yaml" >/dev/null
az_ctl '{"put_hold": [0.25, 0.25], "delete_delay": 0.3, "op_delay": 0.2, "page_size": 2}'
"$TARMAC" db submit --config "$WORK/k.yaml" --team a --gpus 8 --runtime 2s --count 2 >/dev/null
"$TARMAC" db submit --config "$WORK/k.yaml" --team b --gpus 8 --runtime 2s --count 2 --preemptible >/dev/null

# The two windows a random kill rarely hits: tokens committed but no cloud
# call yet, and a VM made in the cloud but its id not recorded.
for point in after_apply after_launch; do
    rc=0
    TARMAC_CRASH_POINT=$point timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" \
        >>"$WORK/kill.out" 2>>"$WORK/crash.log" || rc=$?
    [ "$rc" = 137 ] || fail "crash point $point was not reached (exit $rc)"
done
RANDOM=${SEED:-42}
for i in $(seq 1 "$kills"); do
    pre=""; [ $((i % 2)) = 0 ] && pre=--preemptible
    "$TARMAC" db submit --config "$WORK/k.yaml" --team c --gpus 8 --runtime 1s $pre >/dev/null
    "$TARMAC" serve --config "$WORK/k.yaml" >>"$WORK/kill.out" 2>>"$WORK/kill.log" &
    pid=$!; PIDS+=("$pid")
    sleep "$(( RANDOM % 2 )).$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
submitted=$(psql_q 'SELECT count(*) FROM jobs')
echo "killed the controller $kills times; nodes so far: $(psql_q 'SELECT count(*) FROM nodes')"
timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" --max-wall 5s \
    >>"$WORK/kill.out" 2>>"$WORK/kill.log" || fail "serve after the kills failed"
[ "$(psql_q 'SELECT count(*) FROM jobs')" = "$submitted" ] || fail "jobs lost"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state IN ('requested') OR (instance_id IS NULL AND state NOT IN ('terminated', 'interrupted'))")" = 0 ] \
    || fail "node rows never launched: $(psql_q 'SELECT id, state FROM nodes WHERE instance_id IS NULL')"
check_azure kill9
timeout 120 "$TARMAC" serve --config "$WORK/k.yaml" --exit-when-idle --max-wall 100s \
    >>"$WORK/kill.out" 2>>"$WORK/kill.log" || fail "final serve failed"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "unfinished jobs: $(psql_q "SELECT id, state, state_reason FROM jobs WHERE state <> 'succeeded'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state NOT IN ('terminated', 'interrupted')")" = 0 ] || fail "nodes left live: $(psql_q "SELECT id, pool, state, instance_id, zone FROM nodes WHERE state NOT IN ('terminated', 'interrupted')"); VMs: $(az_vms kill9)"
sleep 1
check_azure kill9 idle
cat "$WORK"/kill.log "$WORK"/crash.log >"$WORK/all-kill.txt"
inside=0
for n in $(sed -n 's/.*msg="azure launch" .* node=\([0-9]*\) .*/\1/p' "$WORK/all-kill.txt" | sort -u); do
    grep -q "msg=\"instance launched\" node=$n " "$WORK/all-kill.txt" || inside=$((inside + 1))
done
puts=$(az_state | python3 -c 'import json,sys; c=json.load(sys.stdin)["counts"]; print(c.get("vm_created",0), c.get("put_existing",0))')
echo "kill -9: $kills random kills + 2 crash points, $(psql_q 'SELECT count(*) FROM nodes') nodes, $submitted jobs, 0 duplicates, 0 orphans (VMs, NICs, disks), 0 jobs lost; kills inside a launch: $inside; VMs created / repeated PUTs answered from the existing VM: $puts"
check_violations
check_no_secrets
if grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$WORK"/*.log >/dev/null 2>&1; then
    fail "sanitizer report in $(grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$WORK"/*.log)"
fi
echo "1 passed, 0 failed"
