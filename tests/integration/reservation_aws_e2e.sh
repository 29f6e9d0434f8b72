#!/usr/bin/env bash
# The controller end to end with a pool's EC2 capacity reservation, against
# tests/lib/ec2_reservation_fake.py in front of moto (both check SigV4; the
# fake checks every request, and every answer it writes, against
# botocore's EC2 model):
#  1. bad reservations: `tarmac check config` refuses one the file says is
#     of another instance type, naming the key; `tarmac serve` refuses one
#     EC2 describes with another type, with EC2's answer;
#  2. jobs on the pool: its nodes go into the reservation, and once it is
#     full the next ones fall over to on-demand;
#  3. kill -9 in the launch path (crash points, then KILLS random kills,
#     default 20), the fake holding each launch into the reservation after
#     moto made it: no launch token with two instances, no instance the
#     database does not know, the reservation never over its count;
#  4. the reservation cancelled in the fake while the controller runs: it
#     notices, records a decision 'reservation_ended' about the pool, and
#     launches no more into it.
#
#   KILLS=50 tests/integration/reservation_aws_e2e.sh
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

kills=${KILLS:-20}
export TARMAC_SIM_AGENT=1 TARMAC_AWS_RESERVATION_REFRESH_MS=300

# ---- moto and the fake beside it ------------------------------------------
"$TM_SOURCE_DIR/tests/lib/moto_fixture.sh" start "$WORK/moto" >"$WORK/moto.env" \
    || fail "moto did not start"
PIDS+=("$(cat "$WORK/moto/moto.pid")")
MOTO_PORT=$(sed -n 's/^MOTO_PORT=//p' "$WORK/moto.env")
AK=$(sed -n 's/^MOTO_ACCESS_KEY_ID=//p' "$WORK/moto.env")
SK=$(sed -n 's/^MOTO_SECRET_ACCESS_KEY=//p' "$WORK/moto.env")
EC2_FAKE_ACCESS_KEY_ID=$AK EC2_FAKE_SECRET_ACCESS_KEY=$SK \
    python3 "$TM_SOURCE_DIR/tests/lib/ec2_reservation_fake.py" "$MOTO_PORT" \
    >"$WORK/fake.out" 2>"$WORK/fake.err" &
PIDS+=("$!")
wait_for 30 'grep -q EC2_RESV_FAKE_READY "$WORK/fake.out"' || fail "the reservation fake did not start"
FAKE="http://127.0.0.1:$(sed -n 's/^EC2_RESV_FAKE_PORT=//p' "$WORK/fake.out")"
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent/tarmac AWS_CONFIG_FILE=/nonexistent/tarmac
export TARMAC_AWS_IMAGE_ID=ami-12c6146b
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2 || true

RID=cr-0123456789abcdef0     # p4d.24xlarge in us-east-1a, 2 instances
BAD=cr-0123456789abcdef1     # p5.48xlarge: not the pool's type
RK=cr-0123456789abcdef2      # 50 instances: every launch of the kill rounds goes into it
RC=cr-0123456789abcdef3      # cancelled while the controller runs
fake() { curl -sf -X POST --data "$2" "$FAKE/__fake/$1" >/dev/null || fail "fake control $1"; }
fake_stat() {
    curl -sf "$FAKE/__fake/stats" | python3 -c "import json,sys; s=json.load(sys.stdin); print($1)"
}
fake reservation "{\"id\": \"$RID\", \"instance_type\": \"p4d.24xlarge\", \"zone\": \"us-east-1a\", \"total\": 2}"
fake reservation "{\"id\": \"$BAD\", \"instance_type\": \"p5.48xlarge\", \"zone\": \"us-east-1a\", \"total\": 2}"
fake reservation "{\"id\": \"$RK\", \"instance_type\": \"p4d.24xlarge\", \"zone\": \"us-east-1a\", \"total\": 50}"
fake reservation "{\"id\": \"$RC\", \"instance_type\": \"p4d.24xlarge\", \"zone\": \"us-east-1a\", \"total\": 5}"

# cloud_instances CLUSTER: one line per instance carrying the cluster tag:
#   id state token reservation
cloud_instances() {
    python3 - "$FAKE" "$AK" "$SK" "$1" <<'PY'
import sys
import boto3
ep, ak, sk, cluster = sys.argv[1:5]
ec2 = boto3.client("ec2", endpoint_url=ep, region_name="us-east-1",
                   aws_access_key_id=ak, aws_secret_access_key=sk)
for page in ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:tarmac:cluster", "Values": [cluster]}]):
    for res in page["Reservations"]:
        for i in res["Instances"]:
            tags = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
            print(i["InstanceId"], i["State"]["Name"], tags.get("tarmac:launch-token", "-"),
                  i.get("CapacityReservationId", "-"))
PY
}

# write_resv_config FILE CLUSTER RESERVATION [stated type]: one zone, the
# reservation's (the planner picks a launch's zone by price, knowing
# nothing of reservations yet, and a launch asked for a zone stays there).
write_resv_config() {
    local stated=""
    [ -n "${4:-}" ] && stated="        instance_type: $4"
    cat >"$1" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: $2
listen: "127.0.0.1:0"
tick_interval: 200ms
log_level: info
scheduler:
  policy: fifo
providers:
  - name: aws
    kind: aws
    region: us-east-1
    endpoint: "$FAKE"
    credentials:
      source: env
    instance_types:
      - name: p4d.24xlarge
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1100000
        on_demand_price: "32.77"
pools:
  - name: res
    provider: aws
    zones: [us-east-1a]
    instance_types: [p4d.24xlarge]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: 40
    idle_grace: 1s
    reservations:
      - id: $3
$stated
YAML
}

# check_cloud CLUSTER RESERVATION COUNT: no token twice, no instance the
# database does not know, no more live instances in the reservation than
# its count.
check_cloud() {
    cloud_instances "$1" >"$WORK/instances.txt"
    local dup orphan=0 inres
    dup=$(awk '{print $3}' "$WORK/instances.txt" | sort | uniq -d | wc -l)
    while read -r _ _ token _; do
        [ "$(psql_q "SELECT count(*) FROM nodes WHERE launch_token = '$token'")" = 1 ] \
            || orphan=$((orphan + 1))
    done <"$WORK/instances.txt"
    inres=$(awk -v r="$2" '$4 == r && ($2 == "pending" || $2 == "running")' "$WORK/instances.txt" | wc -l)
    echo "cluster $1: instances=$(wc -l <"$WORK/instances.txt") node_rows=$(psql_q 'SELECT count(*) FROM nodes') duplicates=$dup orphans=$orphan live_in_reservation=$inres"
    [ "$dup" = 0 ] || fail "$dup launch tokens have more than one instance"
    [ "$orphan" = 0 ] || fail "$orphan instances the database does not know"
    [ "$inres" -le "$3" ] || fail "$inres live instances in a reservation of $3"
}

# ---- 1. bad reservations ----------------------------------------------------
DB=$(new_db itest_resv_bad)
write_resv_config "$WORK/stated.yaml" bad "$RID" p5.48xlarge
rc=0
"$TARMAC" check config --config "$WORK/stated.yaml" >"$WORK/check.out" 2>"$WORK/check.log" || rc=$?
[ "$rc" != 0 ] || fail "check config took a reservation of another type"
grep -q 'pools\[0\].reservations\[0\].instance_type' "$WORK/check.log" \
    || fail "check config did not name the key: $(cat "$WORK/check.log")"
write_resv_config "$WORK/bad.yaml" bad "$BAD"
"$TARMAC" migrate --config "$WORK/bad.yaml" >/dev/null
rc=0
timeout 60 "$TARMAC" serve --config "$WORK/bad.yaml" --max-wall 10s >"$WORK/bad.out" \
    2>"$WORK/bad-serve.log" || rc=$?
[ "$rc" != 0 ] || fail "serve started with a reservation of another type"
grep -q 'is for instance type \\"p5.48xlarge\\".*aws says p5.48xlarge in us-east-1a' "$WORK/bad-serve.log" \
    || grep -q 'is for instance type "p5.48xlarge".*aws says p5.48xlarge in us-east-1a' "$WORK/bad-serve.log" \
    || fail "serve did not give EC2's answer: $(grep -i reservation "$WORK/bad-serve.log" | head -3)"
echo "bad reservations: check config names the key, serve refuses with EC2's answer"

# ---- 2. jobs into the reservation, then past it --------------------------------
DB=$(new_db itest_resv_e2e)
write_resv_config "$WORK/c.yaml" resv "$RID"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 4s --count 3 >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 6s >"$WORK/serve.out" \
    2>"$WORK/serve.log" || fail "serve failed"
cloud_instances resv >"$WORK/e2e.txt"
cat "$WORK/e2e.txt"
# Two in the reservation, the rest past it on demand.  (At least: a node
# whose launch lands while a listing is under way can be taken for gone
# by that tick and launched again, and its slot may then be free again.)
[ "$(awk -v r="$RID" '$4 == r' "$WORK/e2e.txt" | wc -l)" -ge 2 ] \
    || fail "not 2 instances in the reservation: $(cat "$WORK/e2e.txt")"
[ "$(awk '$4 == "-"' "$WORK/e2e.txt" | wc -l)" -ge 1 ] || fail "nothing fell over past the full reservation"
[ "$(fake_stat 's["run_into"].get("'"$RID"'", 0)')" = "$(awk -v r="$RID" '$4 == r' "$WORK/e2e.txt" | wc -l)" ] \
    || fail "the fake counted other launches into it"
check_cloud resv "$RID" 2
echo "jobs: the reservation filled (2), the rest on demand"

# ---- 3. kill -9 in the launch path ---------------------------------------------
# The fake holds each launch into the reservation 0.4 s after moto made
# it, so kills land inside launches: the instance made, its id unrecorded.
fake delay '{"seconds": 0.4}'
DB=$(new_db itest_resv_kill9)
write_resv_config "$WORK/k.yaml" resvkill "$RK"
"$TARMAC" migrate --config "$WORK/k.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/k.yaml" --team a --gpus 8 --runtime 2s --count 2 >/dev/null
for point in after_apply after_launch; do
    rc=0
    TARMAC_CRASH_POINT=$point timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" \
        >>"$WORK/kill.out" 2>>"$WORK/crash.log" || rc=$?
    [ "$rc" = 137 ] || fail "crash point $point was not reached (exit $rc)"
done
RANDOM=${SEED:-42}
for i in $(seq 1 "$kills"); do
    "$TARMAC" db submit --config "$WORK/k.yaml" --team c --gpus 8 --runtime 2s >/dev/null
    "$TARMAC" serve --config "$WORK/k.yaml" >>"$WORK/kill.out" 2>>"$WORK/kill.log" &
    pid=$!; PIDS+=("$pid")
    sleep "0.$(( RANDOM % 10 ))$(( RANDOM % 10 ))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
done
fake delay '{"seconds": 0}'
timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" --max-wall 8s \
    >>"$WORK/kill.out" 2>>"$WORK/kill.log" || fail "serve after the kills failed"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state IN ('requested') OR (instance_id IS NULL AND state <> 'terminated')")" = 0 ] \
    || fail "node rows never launched: $(psql_q 'SELECT id, state FROM nodes WHERE instance_id IS NULL')"
check_cloud resvkill "$RK" 50
[ "$(awk -v r="$RK" '$4 == r' "$WORK/instances.txt" | wc -l)" = "$(psql_q 'SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL')" ] \
    || fail "not every node in the reservation: $(cat "$WORK/instances.txt")"
# Kills inside a launch into the reservation: RunInstances sent, the
# process killed before it recorded the instance (the next one adopted it
# by its launch-token tag).
cat "$WORK"/kill.log "$WORK"/crash.log >"$WORK/all-kill.txt"
inside=0
for n in $(sed -n 's/.*msg="aws launch" .* node=\([0-9]*\) .*reservation=cr-.*/\1/p' "$WORK/all-kill.txt" | sort -u); do
    grep -q "msg=\"instance launched\" node=$n " "$WORK/all-kill.txt" || inside=$((inside + 1))
done
echo "kill -9: $kills random kills + 2 crash points, $(psql_q 'SELECT count(*) FROM nodes') nodes, all in the reservation, 0 duplicates, 0 orphans; kills inside a launch into it: $inside"
timeout 200 "$TARMAC" serve --config "$WORK/k.yaml" --exit-when-idle --max-wall 190s \
    >>"$WORK/kill.out" 2>>"$WORK/kill.log" || fail "final serve failed"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state <> 'succeeded'")" = 0 ] \
    || fail "unfinished jobs: $(psql_q "SELECT id, state, state_reason FROM jobs WHERE state <> 'succeeded'")"

# ---- 4. cancelled in the cloud while the controller runs ------------------------
DB=$(new_db itest_resv_cancel)
write_resv_config "$WORK/x.yaml" resvcancel "$RC"
"$TARMAC" migrate --config "$WORK/x.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/x.yaml" --team d --gpus 8 --runtime 30s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/x.yaml" --max-wall 20s >"$WORK/cancel.out" \
    2>"$WORK/cancel.log" &
serve=$!; PIDS+=("$serve")
wait_for 15 '[ "$(fake_stat "s[\"run_into\"].get(\"$RC\", 0)")" = 1 ]' || fail "no launch into $RC"
fake state "{\"id\": \"$RC\", \"state\": \"cancelled\"}"
wait_for 10 'grep -q "aws reservation ended, not launching into it again.*reservation=$RC state=cancelled" "$WORK/cancel.log"' \
    || fail "the cancellation was not noticed"
"$TARMAC" db submit --config "$WORK/x.yaml" --team d --gpus 8 --runtime 30s --count 2 >/dev/null
# Nodes launched after it (a node may be launched twice: one whose launch
# lands while a listing is under way can be taken for gone by that tick).
wait_for 15 '[ "$(psql_q "SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL AND id > 1")" -ge 2 ]' \
    || fail "no nodes launched after the cancellation: $(psql_q 'SELECT id, state FROM nodes')"
wait "$serve" || fail "serve failed"
[ "$(fake_stat 's["run_into"].get("'"$RC"'", 0)')" = 1 ] || fail "launched into a cancelled reservation"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'reservation_ended' AND subject_kind = 'pool'
             AND subject_id = 'res' AND inputs ->> 'subject' = '$RC' AND inputs ->> 'state' = 'cancelled'")" = 1 ] \
    || fail "no decision about the cancellation: $(psql_q "SELECT kind, subject_id, reason FROM decisions WHERE kind LIKE 'reserv%'")"
psql_q "SELECT reason FROM decisions WHERE kind = 'reservation_ended'"
echo "cancelled: noticed while running, its pool launches no more into it and buys on demand"

[ "$(fake_stat 'len(s["violations"])')" = 0 ] || fail "off botocore's model: $(fake_stat 's["violations"]')"
if grep -rqF -- "$SK" "$WORK"/*.log "$WORK"/*.out; then fail "the secret key appears in a log"; fi
echo "1 passed, 0 failed"
