#!/usr/bin/env bash
# A gang bought whole on moto: EC2 CreateFleet of type instant with
# TotalTargetCapacity = MinTargetCapacity = 2, SingleAvailabilityZone and
# the pool's placement group.  The fault proxy gives the first CreateFleet
# the answer EC2 gives when the minimum cannot be met (no instance, an
# InsufficientInstanceCapacity error for us-east-1a): nothing kept, one
# decision for the set, the shortage remembered; the next pass buys the
# set whole in us-east-1b, each instance tagged with its own node and
# launch token, and the gang runs on both.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
export TARMAC_SIM_AGENT=1

"$TM_SOURCE_DIR/tests/lib/moto_fixture.sh" start "$WORK/moto" >"$WORK/moto.env" || fail "moto did not start"
PIDS+=("$(cat "$WORK/moto/moto.pid")")
MOTO_PORT=$(sed -n 's/^MOTO_PORT=//p' "$WORK/moto.env")
AK=$(sed -n 's/^MOTO_ACCESS_KEY_ID=//p' "$WORK/moto.env")
SK=$(sed -n 's/^MOTO_SECRET_ACCESS_KEY=//p' "$WORK/moto.env")
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent/tarmac AWS_CONFIG_FILE=/nonexistent/tarmac
export TARMAC_AWS_IMAGE_ID=ami-12c6146b
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2 || true
python3 "$TM_SOURCE_DIR/tests/lib/fault_proxy.py" "$MOTO_PORT" >"$WORK/proxy.out" 2>"$WORK/proxy.err" &
PIDS+=("$!")
wait_for 20 'grep -q FAULT_PROXY_READY "$WORK/proxy.out"' || fail "fault proxy did not start"
PROXY="http://127.0.0.1:$(sed -n 's/^FAULT_PROXY_PORT=//p' "$WORK/proxy.out")"

# id type state launch-token node-id launch-set zone, per instance of the cluster
moto_instances() {
    python3 - "http://127.0.0.1:$MOTO_PORT" "$AK" "$SK" "$1" <<'PY'
import sys
import boto3
ep, ak, sk, cluster = sys.argv[1:5]
ec2 = boto3.client("ec2", endpoint_url=ep, region_name="us-east-1",
                   aws_access_key_id=ak, aws_secret_access_key=sk)
for page in ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:tarmac:cluster", "Values": [cluster]}]):
    for res in page["Reservations"]:
        for i in res["Instances"]:
            t = {x["Key"]: x["Value"] for x in i.get("Tags", [])}
            print(i["InstanceId"], i["InstanceType"], i["State"]["Name"], t.get("tarmac:launch-token", "-"),
                  t.get("tarmac:node-id", "-"), t.get("tarmac:launch-set", "-"),
                  i["Placement"]["AvailabilityZone"])
PY
}

write_config() {
    cat >"$1" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: $2
listen: "127.0.0.1:0"
tick_interval: 300ms
log_level: info
scheduler:
  policy: fifo
providers:
  - name: aws
    kind: aws
    region: us-east-1
    endpoint: "$PROXY"
    credentials:
      source: env
    instance_types:
      - name: p4d.24xlarge
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1100000
        on_demand_price: "32.77"
        spot_price: "9.83"
pools:
  - name: od
    provider: aws
    zones: [us-east-1a, us-east-1b]
    instance_types: [p4d.24xlarge]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: 3
    idle_grace: 1s
    placement_group: tarmac-train
YAML
}

DB=$(new_db itest_gang_aws)
write_config "$WORK/c.yaml" gang
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
curl -s -o /dev/null -X POST --data 'CreateFleet:fleet_short' "$PROXY/__proxy/schedule" || fail "proxy control"
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/gang.out" 2>"$WORK/gang.log" || fail "serve failed"

[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'pool' AND jsonb_array_length(inputs -> 'nodes') = 2")" = 1 ] \
    || fail "want one launch_failed decision naming the set's 2 nodes: $(psql_q "SELECT kind, subject_kind, subject_id, reason FROM decisions WHERE kind LIKE 'launch%'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-east-1a' AND state = 'terminated' AND instance_id IS NULL AND billed_from_ms IS NULL")" = 2 ] \
    || fail "the refused set was not given up whole: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-east-1b' AND instance_id IS NOT NULL")" = 2 ] \
    || fail "the set was not bought in us-east-1b: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
grep -q 'msg="aws capacity short, remembered".*zone=us-east-1a market=on_demand code=InsufficientInstanceCapacity' "$WORK/gang.log" \
    || fail "no shortage remembered for us-east-1a"
grep -q 'msg="aws launch set".*nodes=2 .*via=CreateFleet' "$WORK/gang.log" || fail "no CreateFleet for the set"
curl -s "$PROXY/__proxy/stats" >"$WORK/stats.txt"
[ "$(tr , '\n' <"$WORK/stats.txt" | grep -c CreateFleet)" = 2 ] || fail "want 2 CreateFleet calls: $(cat "$WORK/stats.txt")"
[ "$(tr , '\n' <"$WORK/stats.txt" | grep -c RunInstances)" = 0 ] || fail "a set member went through RunInstances"

# In moto: exactly the 2 instances of the second set, each with its own
# node's token and id, none left running.
sleep 1
moto_instances gang >"$WORK/instances.txt"
[ "$(wc -l <"$WORK/instances.txt")" = 2 ] || fail "want 2 instances: $(cat "$WORK/instances.txt")"
while read -r id _ state token node set _; do
    [ "$(psql_q "SELECT count(*) FROM nodes WHERE id = $node AND launch_token = '$token' AND instance_id = '$id'")" = 1 ] \
        || fail "instance $id not tagged with its own node and token: $(cat "$WORK/instances.txt")"
    [ "${token%g00[01]}" = "$set" ] || fail "instance $id: token $token not of set $set"
    [ "$state" = terminated ] || [ "$state" = shutting-down ] || fail "instance $id left $state"
done <"$WORK/instances.txt"
[ "$(awk '{print $4}' "$WORK/instances.txt" | sort -u | wc -l)" = 2 ] || fail "two instances share a token"
if grep -rqF "$SK" "$WORK"/*.log "$WORK"/*.out; then fail "the secret key appears in a log"; fi
echo "gang of 2 on moto: first CreateFleet short (nothing kept, one decision), bought whole in us-east-1b by the second; $(cat "$WORK/stats.txt" | cut -d' ' -f1-2)"

# ---- 2. kill -9 while CreateFleet's answer is on its way ------------------
# moto has made the set (tagged only with the set's token), the controller
# never heard: the restart finds the set by its tag, tags each instance with
# its own node and token, and launches nothing again.
DB=$(new_db itest_gang_aws_kill)
write_config "$WORK/k.yaml" gangk
"$TARMAC" migrate --config "$WORK/k.yaml" >/dev/null
curl -s -o /dev/null -X POST "$PROXY/__proxy/reset" || fail "proxy control"
curl -s -o /dev/null -X POST --data '0,15' "$PROXY/__proxy/delay" || fail "proxy control"
"$TARMAC" db submit --config "$WORK/k.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
"$TARMAC" serve --config "$WORK/k.yaml" --max-wall 40s >"$WORK/kill1.out" 2>"$WORK/kill1.log" &
spid=$!
PIDS+=("$spid")
wait_for 30 'grep -q "msg=\"aws launch set\"" "$WORK/kill1.log"' || fail "no set launched before the kill"
# moto holds the set while its answer waits in the proxy: kill now
wait_for 30 '[ "$(moto_instances gangk | wc -l)" = 2 ]' || fail "moto never made the set"
kill -9 "$spid"
wait "$spid" 2>/dev/null || true
moto_instances gangk >"$WORK/k-before.txt"
[ "$(wc -l <"$WORK/k-before.txt")" = 2 ] || fail "moto should hold the set: $(cat "$WORK/k-before.txt")"
curl -s -o /dev/null -X POST --data '0,0' "$PROXY/__proxy/delay" || fail "proxy control"
timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/kill2.out" 2>"$WORK/kill2.log" || fail "restart failed"
[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed after the restart: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
grep -q 'msg="aws launch set found by its tag, not launching again"' "$WORK/kill2.log" \
    || fail "the restart did not find the set by its tag"
curl -s "$PROXY/__proxy/stats" >"$WORK/kstats.txt"
[ "$(tr , '\n' <"$WORK/kstats.txt" | grep -c CreateFleet)" = 1 ] || fail "the set was launched again: $(cat "$WORK/kstats.txt")"
sleep 1
moto_instances gangk >"$WORK/k-after.txt"
[ "$(wc -l <"$WORK/k-after.txt")" = 2 ] || fail "want the 2 instances only: $(cat "$WORK/k-after.txt")"
while read -r id _ state token node _ _; do
    [ "$(psql_q "SELECT count(*) FROM nodes WHERE id = $node AND launch_token = '$token' AND instance_id = '$id'")" = 1 ] \
        || fail "instance $id not adopted by its own node: $(cat "$WORK/k-after.txt")"
    [ "$state" = terminated ] || [ "$state" = shutting-down ] || fail "instance $id left $state"
done <"$WORK/k-after.txt"
[ "$(psql_q "SELECT count(*) FROM nodes")" = 2 ] || fail "want 2 node rows: $(psql_q 'SELECT id, state, launch_token FROM nodes')"
if grep -rqF "$SK" "$WORK"/*.log "$WORK"/*.out; then fail "the secret key appears in a log"; fi
echo "kill -9 with the set made and unheard of: restart adopted both by the set's tag (1 CreateFleet in all), 0 duplicates, 0 orphans"
echo "2 passed, 0 failed"
