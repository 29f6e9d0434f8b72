#!/usr/bin/env bash
# One queue, three clouds, end to end: a pool group on three sim providers
# standing for aws, gcp and azure (their list prices for 8 A100s), the
# cheapest cloud (azure spot) able to hold one node only.  Two preemptible
# 8-GPU jobs: the first tick buys both on azure, azure refuses the second
# (TM_EQUOTA), and a follow-up pass of the same tick buys it on the next
# cheapest cloud (aws spot) at once, not a tick later (the tick here is 4 s;
# the fallback must come within 2 s of the refusal).  The decision names
# the cloud and the offers passed over with their prices; `tarmac spend`
# shows the spend by provider, agreeing with the ledger.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_xcloud)
cloud() {   # name type od spot [capacity]
    cat <<YAML
  - name: $1
    kind: sim
    region: r-$1
    boot_delay: 1s
    spot_hazard: 0
    shutdown_delay: 1s
    instance_types:
      - {name: $2, gpus: 8, gpu_model: A100, cpu_milli: 96000, memory_mib: 900000,
         on_demand_price: "$3", spot_price: "$4", capacity: ${5:-0}}
YAML
}
pool() {    # name provider type zone capacity_type
    echo "  - {name: $1, group: a100, provider: $2, zones: [$4], instance_types: [$3],"
    echo "     capacity_type: $5, min_nodes: 0, max_nodes: 4, idle_grace: 2s}"
}
{
    cat <<YAML
database:
  url: "$DB"
  pool_size: 3
cluster: itest
listen: "127.0.0.1:0"
tick_interval: 4s
log_level: info
scheduler:
  policy: fifo
providers:
YAML
    cloud aws p4d.24xlarge 21.957642 5.0933
    cloud gcp a2-highgpu-8g 29.38708 15.42416
    cloud azure Standard_ND96asr_v4 27.197 2.99167 1
    echo "pools:"
    pool aws-spot aws p4d.24xlarge us-east-1a spot
    pool gcp-spot gcp a2-highgpu-8g us-central1-a spot
    pool azure-spot azure Standard_ND96asr_v4 '"1"' spot
    pool aws-od aws p4d.24xlarge us-east-1a on_demand
} >"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null || fail "migrate"
FIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name fin --role finance 2>"$WORK/token.log") \
    || fail "token create"
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 20s --preemptible --count 2 >/dev/null \
    || fail "submit"

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
PIDS+=("$!")
wait_for 30 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 2 ]" \
    || fail "two nodes never ready: $(psql_q 'SELECT id, pool, state, state_reason FROM nodes')"

# Azure took one, refused the other; aws got it; gcp (dearer) nothing.
nodes=$(psql_q "SELECT string_agg(pool || ':' || state, ' ' ORDER BY pool, state) FROM nodes")
[ "$nodes" = "aws-spot:ready azure-spot:ready azure-spot:terminated" ] || fail "nodes: $nodes"
grep -q 'msg="launch refused for capacity".*provider=azure' "$WORK/serve.log" || fail "no refusal by azure"
grep -q 'msg="follow-up pass for a capacity shortage"' "$WORK/serve.log" || fail "no follow-up pass"
# The same tick: the aws request within 2 s of azure's refusal (a tick is 4 s).
gap=$(psql_q "SELECT (SELECT min(at_ms) FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws')
                   - (SELECT min(at_ms) FROM decisions WHERE kind = 'launch_failed')")
[ -n "$gap" ] && [ "$gap" -ge 0 ] && [ "$gap" -lt 2000 ] \
    || fail "fallback $gap ms after the shortage: $(psql_q "SELECT at_ms, kind, reason FROM decisions ORDER BY id")"
why=$(psql_q "SELECT reason FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws'")
case "$why" in
    *"cloud aws: p4d.24xlarge spot 5.09 USD/h; passed over: azure Standard_ND96asr_v4 spot 2.99 USD/h (short), gcp a2-highgpu-8g spot 15.42 USD/h (dearer)"*) ;;
    *) fail "the aws decision does not name the offers passed over: $why" ;;
esac
[ "$(psql_q "SELECT inputs -> 'offers' -> 0 ->> 'status' || ' ' || (inputs -> 'offers' -> 0 ->> 'price_uusd_per_hour')
             FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws'")" = "short 2991670" ] \
    || fail "offers: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'launch' AND inputs ->> 'provider' = 'aws'")"

# Spend by provider, as the API shows it and as the ledger has it.
PORT=$(sed -n 's/.*api listening.* port=\([0-9][0-9]*\).*/\1/p' "$WORK/serve.log" | head -n 1)
export TARMAC_URL=http://127.0.0.1:$PORT
spend_by() {
    TARMAC_TOKEN=$FIN "$TARMAC" spend --output json >"$WORK/spend.json" 2>"$WORK/spend.err" || return 1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join("%s=%d" % (p["provider"], p["cents"]) for p in d["providers"]))' "$WORK/spend.json"
}
wait_for 30 "spend_by | grep -q 'aws=[1-9].*azure=[1-9]'" \
    || fail "no spend on both clouds: $(spend_by) $(cat "$WORK/spend.err")"
TARMAC_TOKEN=$FIN "$TARMAC" spend >"$WORK/spend.txt" || fail "tarmac spend"
grep -q '^PROVIDER' "$WORK/spend.txt" && grep -q '^aws ' "$WORK/spend.txt" && grep -q '^azure ' "$WORK/spend.txt" \
    || fail "spend table: $(cat "$WORK/spend.txt")"
# The API's figure per provider is the ledger's (read after it, so at most).
api=$(spend_by)
for pc in $api; do
    prov=${pc%%=*}; cents=${pc#*=}
    led=$(psql_q "SELECT coalesce(sum(s.cents), 0) FROM spend s JOIN pools pl ON pl.name = s.pool
                  WHERE pl.provider = '$prov'")
    [ "$cents" -le "$led" ] || fail "spend of $prov: the API says $cents cents, the ledger (read later) $led"
done
kill -TERM "${PIDS[0]}"
wait "${PIDS[0]}" || true
ledger=$(psql_q "SELECT string_agg(provider || '=' || c, ' ' ORDER BY provider) FROM
                 (SELECT pl.provider, sum(s.cents) AS c FROM spend s JOIN pools pl ON pl.name = s.pool
                  GROUP BY pl.provider) q")
echo "spend by provider: API $api, ledger at the end $ledger"
[ -z "$(psql_q "SELECT 1 FROM spend s JOIN pools pl ON pl.name = s.pool WHERE pl.provider = 'gcp' LIMIT 1")" ] \
    || fail "gcp billed though it launched nothing"
# Each node billed once, to its own cloud.
[ "$(psql_q "SELECT count(*) FROM (SELECT token FROM simcloud.instances GROUP BY token HAVING count(*) > 1) d")" = 0 ] \
    || fail "duplicate instances"
echo "azure short after one node, aws filled in ${gap} ms (tick 4000 ms); $why"
echo "1 passed, 0 failed"
