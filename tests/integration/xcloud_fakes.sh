#!/usr/bin/env bash
# One queue, three clouds against the real fakes: moto (EC2, SigV4
# checked), the GCP fake (Compute v1, discovery-checked) and the Azure fake
# (ARM over HTTPS, swagger-checked), one pool group of spot A100 pools on
# all three at their list prices: Azure ND96amsr 3.60 < AWS p4d 5.09 < GCP
# a2 15.42 USD/h.  Azure's spot capacity in zone 1 is exhausted in the fake
# (ZonalAllocationFailed): the first launch goes to Azure, comes back
# TM_EQUOTA, and a follow-up pass of the same tick launches on AWS (the next
# cheapest) at once: within 2 s of the refusal, with a tick of 4 s.  The job
# runs there; nothing is left on any cloud; every request validated; no
# secret in any log or decision.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"   # Azure fake, TARMAC_SIM_AGENT=1
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"
gcp_fake_start

"$TM_SOURCE_DIR/tests/lib/moto_fixture.sh" start "$WORK/moto" >"$WORK/moto.env" || fail "moto did not start"
PIDS+=("$(cat "$WORK/moto/moto.pid")")
MOTO_PORT=$(sed -n 's/^MOTO_PORT=//p' "$WORK/moto.env")
AK=$(sed -n 's/^MOTO_ACCESS_KEY_ID=//p' "$WORK/moto.env")
SK=$(sed -n 's/^MOTO_SECRET_ACCESS_KEY=//p' "$WORK/moto.env")
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK AWS_REGION=us-east-1
export AWS_SHARED_CREDENTIALS_FILE=/nonexistent/tarmac AWS_CONFIG_FILE=/nonexistent/tarmac
export TARMAC_AWS_IMAGE_ID=ami-12c6146b
unset AWS_PROFILE AWS_SESSION_TOKEN AWS_ENDPOINT_URL AWS_ENDPOINT_URL_EC2 || true

DB=$(new_db itest_xcloud_fakes)
cat >"$WORK/c.yaml" <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: xc
listen: "127.0.0.1:0"
tick_interval: 4s
log_level: info
scheduler:
  policy: fifo
providers:
  - name: aws
    kind: aws
    region: us-east-1
    endpoint: "http://127.0.0.1:$MOTO_PORT"
    credentials:
      source: env
    instance_types:
      - {name: p4d.24xlarge, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 1100000,
         on_demand_price: "21.957642", spot_price: "5.0933"}
  - name: gcp
    kind: gcp
    region: us-central1
    project: tarmac-test
    endpoint: "$GCP_ENDPOINT"
    token_url: "$GCP_TOKEN_URL"
    credentials:
      source: file
      file: "$GCP_KEY"
    instance_types:
      - {name: a2-highgpu-8g, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 680000,
         on_demand_price: "29.38708", spot_price: "15.42416"}
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
      - {name: Standard_ND96amsr_A100_v4, gpus: 8, gpu_model: A100, cpu_milli: 96000,
         memory_mib: 1900000, on_demand_price: "32.77", spot_price: "3.6047"}
pools:
  - {name: aws-spot, group: a100, provider: aws, zones: [us-east-1a], instance_types: [p4d.24xlarge],
     capacity_type: spot, max_nodes: 2, idle_grace: 2s}
  - {name: gcp-spot, group: a100, provider: gcp, zones: [us-central1-a], instance_types: [a2-highgpu-8g],
     capacity_type: spot, max_nodes: 2, idle_grace: 2s}
  - {name: azure-spot, group: a100, provider: azure, zones: ["1"], instance_types: [Standard_ND96amsr_A100_v4],
     capacity_type: spot, max_nodes: 2, idle_grace: 2s}
YAML
"$TARMAC" check config --config "$WORK/c.yaml" >"$WORK/check.out" || fail "check config: $(cat "$WORK/check.out")"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null || fail "migrate"
az_ctl '{"capacity": {"Standard_ND96amsr_A100_v4/1/Spot": 0}}'
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3s --preemptible >/dev/null || fail "submit"
timeout 90 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 60s \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"

[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = 1 ] \
    || fail "job did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
nodes=$(psql_q "SELECT string_agg(pool || ':' || coalesce(instance_id, '-'), ' ' ORDER BY id) FROM nodes")
case "$nodes" in
    "azure-spot:- aws-spot:i-"*) ;;
    *) fail "expected azure refused, then aws: $nodes" ;;
esac
grep -q 'msg="launch refused for capacity".*provider=azure' "$WORK/serve.log" || fail "azure did not refuse"
gap=$(psql_q "SELECT (SELECT min(at_ms) FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws')
                   - (SELECT min(at_ms) FROM decisions WHERE kind = 'launch_failed')")
[ -n "$gap" ] && [ "$gap" -ge 0 ] && [ "$gap" -lt 2000 ] \
    || fail "aws launched $gap ms after azure's refusal (tick 4000 ms): $(psql_q "SELECT at_ms, kind, reason FROM decisions ORDER BY id")"
why=$(psql_q "SELECT reason FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws'")
case "$why" in
    *"cloud aws: p4d.24xlarge spot 5.09 USD/h; passed over: azure Standard_ND96amsr_A100_v4 spot 3.60 USD/h (short), gcp a2-highgpu-8g spot 15.42 USD/h (dearer)"*) ;;
    *) fail "the decision does not name the offers passed over: $why" ;;
esac
[ "$(gcp_instances | awk '$9 == "xc"' | wc -l)" = 0 ] || fail "something launched on gcp (dearer)"
sleep 1
check_azure xc idle
gcp_check_cloud xc idle
check_violations
gcp_no_violations
check_no_secrets
gcp_no_secrets
grep -qF "$SK" "$WORK"/*.log "$WORK"/*.out && fail "the AWS secret key in a log"
echo "azure (3.60 USD/h) short, aws (5.09) launched ${gap} ms later in the same tick; gcp (15.42) passed over"
echo "1 passed, 0 failed"
