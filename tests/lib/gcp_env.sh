#!/usr/bin/env bash
# tests/lib/gcp_env.sh: the GCP fake and helpers for the gcp integration
# scripts.  Source after itest.sh.  Defines
#   gcp_fake_start                 key + fake, sets GCP_* and GCP_PORT
#   write_gcp_config FILE CLUSTER [max] [grace] [tick] [keyfile] [endpoint]
#   gcp_instances                  one line per instance in the fake:
#                                  id type model action status token pool node cluster
#   gcp_control JSON               POST /__fake/control
#   gcp_check_cloud CLUSTER [idle] 0 duplicates, 0 orphans, 0 missing
#   gcp_no_secrets                 no key, token or JWT in $WORK logs
#   gcp_no_violations              every request validated

GCP_EMAIL=tarmac-e2e@tarmac-test.iam.gserviceaccount.com

gcp_fake_start() {
    GCP_KEY="$WORK/key.json"
    python3 "$TM_SOURCE_DIR/tests/lib/gcp_fake.py" make-key "$GCP_KEY" "$GCP_EMAIL" tarmac-test
    python3 "$TM_SOURCE_DIR/tests/lib/gcp_fake.py" --key "$GCP_KEY" --op-delay-ms 100 \
        --token-log "$WORK/issued-tokens.txt" >"$WORK/fake.out" 2>"$WORK/fake.err" &
    PIDS+=("$!")
    wait_for 20 'grep -q GCP_FAKE_READY "$WORK/fake.out"' || fail "gcp fake did not start: $(cat "$WORK/fake.err")"
    GCP_PORT=$(sed -n 's/^GCP_FAKE_PORT=//p' "$WORK/fake.out")
    GCP_BASE="http://127.0.0.1:$GCP_PORT"
    GCP_ENDPOINT="$GCP_BASE/compute/v1"
    GCP_TOKEN_URL="$GCP_BASE/token"
    unset GOOGLE_APPLICATION_CREDENTIALS || true
}

write_gcp_config() {
    local file=$1 cluster=$2 max=${3:-3} grace=${4:-2s} tick=${5:-300ms} key=${6:-$GCP_KEY}
    local endpoint=${7:-$GCP_ENDPOINT}
    cat >"$file" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: $cluster
listen: "127.0.0.1:0"
tick_interval: $tick
log_level: info
scheduler:
  policy: fifo
providers:
  - name: gcp
    kind: gcp
    region: us-central1
    project: tarmac-test
    endpoint: "$endpoint"
    token_url: "$GCP_TOKEN_URL"
    credentials:
      source: file
      file: "$key"
    instance_types:
      - name: a2-highgpu-8g
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 680000
        on_demand_price: "29.39"
        spot_price: "8.82"
pools:
  - name: od
    provider: gcp
    zones: [us-central1-a, us-central1-b]
    instance_types: [a2-highgpu-8g]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
  - name: spot
    provider: gcp
    zones: [us-central1-a, us-central1-b, us-central1-c]
    instance_types: [a2-highgpu-8g]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: spot
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
YAML
}

gcp_instances() {
    curl -s "$GCP_BASE/__fake/state" | python3 -c '
import json, sys
for i in json.load(sys.stdin)["instances"]:
    m = i["metadata"]; l = i["labels"]
    print(i["zone"] + "/" + i["name"], i["machineType"], i["provisioningModel"],
          i["instanceTerminationAction"] or "-", i["status"], m.get("tarmac-launch-token", "-"),
          m.get("tarmac-pool", "-"), l.get("tarmac-node-id", "-"), m.get("tarmac-cluster", "-"))'
}

gcp_control() {
    curl -s -X POST --data "$1" "$GCP_BASE/__fake/control"
}

gcp_check_cloud() {
    local cluster=$1 idle=${2:-}
    gcp_instances | awk -v c="$cluster" '$9 == c' >"$WORK/instances.txt"
    local n dup orphan missing alive id
    n=$(wc -l <"$WORK/instances.txt")
    dup=$(awk '{print $6}' "$WORK/instances.txt" | sort | uniq -d | wc -l)
    orphan=0
    while read -r _ _ _ _ _ token _ _ _; do
        [ "$(psql_q "SELECT count(*) FROM nodes WHERE launch_token = '$token'")" = 1 ] \
            || orphan=$((orphan + 1))
    done <"$WORK/instances.txt"
    missing=0
    # A node being terminated may be gone already: the next pass marks it gone.
    for id in $(psql_q "SELECT instance_id FROM nodes WHERE instance_id IS NOT NULL AND state NOT IN ('terminating', 'terminated', 'interrupted')"); do
        [ "$(awk -v id="$id" '$1 == id' "$WORK/instances.txt" | wc -l)" = 1 ] || missing=$((missing + 1))
    done
    alive=$(awk '$5 != "STOPPING" && $5 != "TERMINATED"' "$WORK/instances.txt" | wc -l)
    echo "cluster $cluster: instances=$n node_rows=$(psql_q 'SELECT count(*) FROM nodes') duplicates=$dup orphans=$orphan missing=$missing alive=$alive"
    [ "$dup" = 0 ] || fail "$dup launch tokens have more than one instance"
    [ "$orphan" = 0 ] || fail "$orphan instances the database does not know"
    [ "$missing" = 0 ] || fail "$missing live nodes' instances not in the cloud"
    if [ -n "$idle" ]; then
        [ "$n" = 0 ] || fail "instances left: $(cat "$WORK/instances.txt")"
    fi
}

gcp_no_secrets() {
    local pem_line
    # A line from the middle of the PEM body: no log may hold any of it.
    pem_line=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["private_key"].splitlines()[5])' "$GCP_KEY")
    # Decisions (reason and inputs) of every database this run used.
    : >"$WORK/decisions.dump"
    for d in ${GCP_DBS:-} ${DB:-}; do
        psql -X -q -t -A -d "$d" -c "SELECT reason || ' ' || inputs::text FROM decisions" \
            >>"$WORK/decisions.dump" 2>/dev/null || true
    done
    local logs=("$WORK"/*.log "$WORK"/*.out "$WORK/decisions.dump")
    if grep -qF -- "$pem_line" "${logs[@]}"; then fail "private key material in a log"; fi
    if grep -q 'eyJhbGciOiJSUzI1NiJ9\.' "${logs[@]}"; then fail "a JWT in a log"; fi
    local n=0 t
    while read -r t; do
        [ -n "$t" ] || continue
        n=$((n + 1))
        if grep -qF -- "$t" "${logs[@]}"; then fail "an access token or assertion in a log"; fi
    done < <(sort -u "$WORK/issued-tokens.txt")
    echo "no private key, token or JWT in any log line or decision ($n tokens and assertions checked)"
}

gcp_no_violations() {
    local v
    v=$(curl -s "$GCP_BASE/__fake/state" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("\n".join(d["violations"])); print("COUNTS", json.dumps(d["counts"]), file=sys.stderr)')
    [ -z "$v" ] || fail "requests the real API would refuse: $v"
    echo "every request validated against the discovery document"
}
