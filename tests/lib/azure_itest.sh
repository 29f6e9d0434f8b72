#!/usr/bin/env bash
# Shared by tests/integration/azure_*.sh (source after itest.sh): starts the
# Azure fake over HTTPS and defines
#   write_azure_config FILE CLUSTER [max] [grace] [tick] [zones_od] [zones_spot]
#   az_state            the fake's state (JSON) on stdout
#   az_ctl JSON         POST a control message to the fake
#   az_vms CLUSTER      one line per VM with the cluster tag:
#                       name size priority state token pool node zone
#   az_token            a bearer token from the fake's token endpoint
#   check_azure CLUSTER [idle]   duplicates / orphans (VMs, NICs, disks) / missing
#   check_violations    no request the fake refused as the real API would
#   check_no_secrets    neither the client secret nor any issued token in a log
"$TM_SOURCE_DIR/tests/lib/azure_fixture.sh" start "$WORK/azure" >"$WORK/azure.env" \
    || fail "azure fake did not start"
# shellcheck disable=SC1091
. "$WORK/azure.env"
PIDS+=("$AZURE_FAKE_PID")
export AZURE_CLIENT_SECRET=$AZURE_FAKE_SECRET
export TARMAC_SIM_AGENT=1 TARMAC_AZURE_POLL_MS=100
SUBNET=/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default
# The fake checks our requests; curl talks to its control routes.
az_curl() { curl -sS --cacert "$AZURE_FAKE_CA" "$@"; }
az_state() { az_curl "$AZURE_FAKE_URL/__fake/state"; }
az_ctl() { az_curl -X POST --data "$1" "$AZURE_FAKE_URL/__fake/control" >/dev/null; }
az_token() {
    az_curl -X POST -H 'Content-Type: application/x-www-form-urlencoded' \
        --data-urlencode client_id=client-1 --data-urlencode grant_type=client_credentials \
        --data-urlencode scope=https://management.azure.com/.default \
        --data-urlencode "client_secret=$AZURE_FAKE_SECRET" \
        "$AZURE_FAKE_URL/tenant-1/oauth2/v2.0/token" | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])'
}
az_evict() {
    local tok; tok=$(az_token)
    az_curl -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $tok" -H 'Content-Length: 0' \
        "$AZURE_FAKE_URL/subscriptions/sub-1/resourceGroups/rg-1/providers/Microsoft.Compute/virtualMachines/$1/simulateEviction?api-version=2024-07-01"
}
az_vms() {
    az_state | python3 -c '
import json, sys
cluster = sys.argv[1]
s = json.load(sys.stdin)
for n, vm in sorted(s["vms"].items()):
    t = vm.get("tags", {})
    if t.get("tarmac-cluster") != cluster:
        continue
    p = vm["properties"]
    print(n, p["hardwareProfile"]["vmSize"], p.get("priority", "Regular"), p["provisioningState"],
          t.get("tarmac-launch-token", "-"), t.get("tarmac-pool", "-"), t.get("tarmac-node-id", "-"),
          (vm.get("zones") or ["-"])[0])
' "$1"
}

# write_azure_config FILE CLUSTER [max] [grace] [tick] [zones_od] [zones_spot]
write_azure_config() {
    local file=$1 cluster=$2 max=${3:-3} grace=${4:-2s} tick=${5:-300ms}
    local zod=${6:-'["1", "2"]'} zspot=${7:-'["1", "2", "3"]'}
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
  - name: azure
    kind: azure
    region: eastus
    endpoint: "$AZURE_FAKE_URL"
    credentials:
      source: env
    azure:
      tenant_id: tenant-1
      client_id: client-1
      subscription_id: sub-1
      resource_group: rg-1
      subnet_id: $SUBNET
      image: "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
      ssh_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeKeyForTests tarmac"
      authority: "$AZURE_FAKE_URL"
      ca_file: "$AZURE_FAKE_CA"
    instance_types:
      - name: Standard_ND96amsr_A100_v4
        gpus: 8
        gpu_model: A100
        cpu_milli: 96000
        memory_mib: 1900000
        on_demand_price: "32.77"
        spot_price: "9.83"
pools:
  - name: od
    provider: azure
    zones: $zod
    instance_types: [Standard_ND96amsr_A100_v4]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: on_demand
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
  - name: spot
    provider: azure
    zones: $zspot
    instance_types: [Standard_ND96amsr_A100_v4]
    gpu_model: A100
    gpus_per_node: 8
    capacity_type: spot
    min_nodes: 0
    max_nodes: $max
    idle_grace: $grace
YAML
}

# check_azure CLUSTER [idle]
check_azure() {
    local cluster=$1 idle=${2:-}
    az_vms "$cluster" >"$WORK/vms.txt"
    local n dup orphan missing alive nics disks
    n=$(wc -l <"$WORK/vms.txt")
    dup=$(awk '{print $5}' "$WORK/vms.txt" | sort | uniq -d | wc -l)
    orphan=0
    while read -r _ _ _ _ token _ _ _; do
        [ "$(psql_q "SELECT count(*) FROM nodes WHERE launch_token = '$token'")" = 1 ] \
            || orphan=$((orphan + 1))
    done <"$WORK/vms.txt"
    missing=0
    # A node being terminated may already have lost its VM (deleted, not yet
    # observed); every other live node must have one.
    for id in $(psql_q "SELECT instance_id FROM nodes WHERE instance_id IS NOT NULL AND state NOT IN ('terminated', 'interrupted', 'terminating')"); do
        [ "$(awk -v id="$id" '$1 == id' "$WORK/vms.txt" | wc -l)" = 1 ] || missing=$((missing + 1))
    done
    # A NIC or disk whose VM is gone bills on: an orphan.
    read -r nics disks < <(az_state | python3 -c '
import json, sys
s = json.load(sys.stdin)
vms = set(s["vms"])
print(sum(1 for x in s["nics"] if x[:-4] not in vms), sum(1 for x in s["disks"] if x.rsplit("_OsDisk", 1)[0] not in vms))')
    alive=$(awk '$4 != "Deleting"' "$WORK/vms.txt" | wc -l)
    echo "cluster $cluster: vms=$n node_rows=$(psql_q 'SELECT count(*) FROM nodes') duplicates=$dup orphans=$orphan orphan_nics=$nics orphan_disks=$disks missing=$missing alive=$alive"
    [ "$dup" = 0 ] || fail "$dup launch tokens have more than one VM"
    [ "$orphan" = 0 ] || fail "$orphan VMs the database does not know: $(cat "$WORK/vms.txt")"
    [ "$nics" = 0 ] || fail "$nics NICs left without their VM"
    [ "$disks" = 0 ] || fail "$disks OS disks left without their VM"
    [ "$missing" = 0 ] || fail "$missing recorded VMs not in the cloud"
    if [ -n "$idle" ]; then
        [ "$alive" = 0 ] || fail "$alive VMs left: $(cat "$WORK/vms.txt")"
    fi
}

check_violations() {
    local v; v=$(az_curl "$AZURE_FAKE_URL/__fake/violations")
    [ "$v" = "[]" ] || fail "requests the real API would refuse: $v"
}

# Every token the fake issued and the client secret: in no log line.
check_no_secrets() {
    az_curl "$AZURE_FAKE_URL/__fake/tokens" >"$WORK/tokens.txt"
    echo "$AZURE_FAKE_SECRET" >>"$WORK/tokens.txt"
    local n; n=$(grep -c . "$WORK/tokens.txt")
    if grep -rqFf "$WORK/tokens.txt" "$WORK"/*.log "$WORK"/*.out; then
        fail "a client secret or token appears in a log: $(grep -rlFf "$WORK/tokens.txt" "$WORK"/*.log "$WORK"/*.out)"
    fi
    # decisions (the reconcile record) too
    psql_q "SELECT d::text FROM decisions d" >"$WORK/decisions.txt"
    [ -s "$WORK/decisions.txt" ] || fail "no decisions recorded to check"
    if grep -qFf "$WORK/tokens.txt" "$WORK/decisions.txt"; then fail "a secret in a decision"; fi
    echo "no client secret or token ($((n - 1)) issued) in any log line or in $(wc -l <"$WORK/decisions.txt") decisions"
}
