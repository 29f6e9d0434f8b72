#!/usr/bin/env bash
# /metrics on the real binary, read through the strict exposition parser
# (tests/lib/prom_parse.py): a sim cloud that holds one sim.8x instance at
# a time and two 8-GPU jobs, so the second node's launch is refused for
# capacity over and over.  Then: this replica leads; its ticks count up and
# their durations fill a histogram; the refusals are provider errors of
# kind quota and launch failures; once the churn stops (the waiting job is
# cancelled), launches equal the node rows per pool and capacity type and
# the spend rate is the billed node's price; heartbeat samples posted
# through the API are the pool's utilisation; a second replica stands by
# and shows the same figures from the database.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_metrics)
write_config "$WORK/c.yaml" 2 30s 1s 300ms
sed -i 's|^        spot_price: "9.83"$|&\n        capacity: 1|' "$WORK/c.yaml"
[ "$(grep -c '^        capacity: 1$' "$WORK/c.yaml")" = 1 ] || fail "could not limit sim.8x"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
TOKEN=$("$TARMAC" token create --name it-admin --role admin --config "$WORK/c.yaml" 2>"$WORK/token.log") \
    || fail "token create"
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 600s --count 2 >/dev/null

"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
wait_for 20 "grep -q 'api_port=' '$WORK/serve.log'" || fail "serve did not start"
BASE=http://127.0.0.1:$(grep -o 'api_port=[0-9]*' "$WORK/serve.log" | head -n 1 | cut -d= -f2)

# scrape N: /metrics into m<N>.txt, parsed into m<N>.json (or fail).
scrape() {
    curl -fsS -o "$WORK/m$1.txt" "$BASE/metrics" || fail "metrics"
    python3 "$TM_SOURCE_DIR/tests/lib/prom_parse.py" "$WORK/m$1.txt" >"$WORK/m$1.json" \
        || fail "metrics $1 do not parse: $(python3 "$TM_SOURCE_DIR/tests/lib/prom_parse.py" "$WORK/m$1.txt" 2>&1)"
}
# metric N FAMILY TYPE [@SAMPLE] [LABEL=VALUE...]: the value of the sample
# with exactly those labels (%g), after checking the family's type.
metric() {
    python3 - "$WORK/m$1.json" "${@:2}" <<'PY'
import json, sys
fams = json.load(open(sys.argv[1]))
fam, typ, rest = fams.get(sys.argv[2]), sys.argv[3], sys.argv[4:]
if fam is None or fam["type"] != typ:
    sys.exit(f"{sys.argv[2]} is not a {typ}: {fam and fam['type']}")
name = [a[1:] for a in rest if a.startswith("@")]
want = dict(a.split("=", 1) for a in rest if not a.startswith("@"))
for s in fam["samples"]:
    if s["labels"] == want and (not name or s.get("name") == name[0]):
        v = s["value"]
        print(v if isinstance(v, str) else "%g" % v)
        break
else:
    sys.exit(f"no sample {sys.argv[2]} {name} {want}")
PY
}
ge() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2"; }

# 1. A node up for the first job, the second refused for capacity.
wait_for 60 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 1 ]" \
    || fail "no node ready: $(psql_q 'SELECT id, state, state_reason FROM nodes')"
wait_for 60 "[ \"\$(psql_q \"SELECT count(*) FROM decisions WHERE kind = 'launch_failed'\")\" -ge 2 ]" \
    || fail "no launch refused: $(psql_q 'SELECT id, state, state_reason FROM nodes')"
scrape 1
[ "$(metric 1 tarmac_leader gauge)" = 1 ] || fail "not leading"
quota=$(metric 1 tarmac_provider_errors_total counter provider=sim op=launch kind=quota)
ge "$quota" 2 || fail "quota errors: $quota"
launches=$(metric 1 tarmac_provider_calls_total counter provider=sim op=launch)
ge "$launches" "$((quota + 1))" || fail "launch calls $launches, quota errors $quota"
[ "$(metric 1 tarmac_provider_errors_total counter provider=sim op=list kind=quota)" = 0 ] || fail "list errors"
ge "$(metric 1 tarmac_provider_calls_total counter provider=sim op=list)" 2 || fail "list calls"
ge "$(metric 1 tarmac_node_launch_failures_total counter pool=od)" 2 || fail "launch failures"
[ "$(metric 1 tarmac_node_launch_failures_total counter pool=spot)" = 0 ] || fail "spot launch failures"
count=$(metric 1 tarmac_tick_duration_seconds histogram @tarmac_tick_duration_seconds_count)
ge "$count" 2 || fail "tick durations: $count"
[ "$(metric 1 tarmac_tick_duration_seconds histogram @tarmac_tick_duration_seconds_bucket le=+Inf)" = "$count" ] \
    || fail "+Inf bucket"
ticks=$(metric 1 tarmac_ticks_total counter)
ge "$ticks" "$count" || fail "ticks $ticks < leader ticks $count"

# 2. Ticks go on counting.
wait_for 20 "scrape 2; ge \$(metric 2 tarmac_ticks_total counter) $((ticks + 2))" || fail "ticks stopped at $ticks"

# 3. Stop the churn: the waiting job cancelled, no launch in flight.
psql_q "UPDATE jobs SET state = 'cancelled', finished_ms = 1 WHERE state = 'queued'" >/dev/null
# settled: no launch in flight and no new node row for a second.
nodes_now() { psql_q "SELECT count(*) || '/' || count(*) FILTER (WHERE state = 'requested') FROM nodes"; }
settled() {
    local before
    before=$(nodes_now)
    sleep 1
    [ "$(nodes_now)" = "$before" ] && [ "${before#*/}" = 0 ]
}
wait_for 30 settled || fail "the fleet did not settle: $(psql_q 'SELECT id, state FROM nodes')"
scrape 3
for pool in od spot; do
    for ct in on_demand spot; do
        want=$(psql_q "SELECT count(*) FROM nodes WHERE pool = '$pool' AND capacity_type = '$ct'")
        got=$(metric 3 tarmac_node_launches_total counter pool=$pool capacity_type=$ct)
        [ "$got" = "$want" ] || fail "launches $pool/$ct: metrics $got, node rows $want"
    done
    want=$(psql_q "SELECT count(*) FROM nodes WHERE pool = '$pool' AND instance_id IS NULL AND state = 'terminated'")
    [ "$(metric 3 tarmac_node_launch_failures_total counter pool=$pool)" = "$want" ] || fail "launch failures $pool"
done
# Every refusal the controller counted is a node row that never got an
# instance, and the other way round.
[ "$(metric 3 tarmac_provider_errors_total counter provider=sim op=launch kind=quota)" \
    = "$(metric 3 tarmac_node_launch_failures_total counter pool=od)" ] || fail "quota errors and launch failures differ"
[ "$(metric 3 tarmac_spend_rate_cents_per_hour gauge pool=od)" = 3277 ] \
    || fail "spend rate: $(metric 3 tarmac_spend_rate_cents_per_hour gauge pool=od), nodes $(psql_q 'SELECT id, state FROM nodes')"
[ "$(metric 3 tarmac_spend_rate_cents_per_hour gauge pool=spot)" = 0 ] || fail "spot spend rate"
[ "$(metric 3 tarmac_gpus gauge pool=od model=A100 state=allocated)" = 8 ] || fail "allocated GPUs"
[ "$(metric 3 tarmac_gpu_utilisation_ratio gauge pool=od model=A100)" = NaN ] || fail "utilisation without samples"

# 4. Utilisation from the node's heartbeat samples.
NODE=$(psql_q "SELECT id FROM nodes WHERE state = 'ready'")
code=$(curl -sS -o "$WORK/hb.json" -w '%{http_code}' -X POST "$BASE/v1/nodes/$NODE/heartbeat" \
    -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"gpus":[{"index":0,"util_percent":30,"memory_used_mib":100},{"index":1,"util_percent":90,"memory_used_mib":100}]}')
[ "$code" = 200 ] || fail "heartbeat: $code $(cat "$WORK/hb.json")"
scrape 4
[ "$(metric 4 tarmac_gpu_utilisation_ratio gauge pool=od model=A100)" = 0.6 ] \
    || fail "utilisation: $(metric 4 tarmac_gpu_utilisation_ratio gauge pool=od model=A100)"
[ "$(metric 4 tarmac_gpu_utilisation_samples gauge pool=od model=A100)" = 2 ] || fail "samples"
[ "$(metric 4 tarmac_gpu_utilisation_samples gauge pool=spot model=A100)" = 0 ] || fail "spot samples"

# 5. A second replica stands by: not leading, no leader tick, no cloud
#    call, and the same figures from the database as the leader.
"$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/standby.out" 2>"$WORK/standby.log" &
STANDBY=$!
PIDS+=("$STANDBY")
wait_for 20 "grep -q 'api_port=' '$WORK/standby.log'" || fail "the second replica did not start"
LEADER_BASE=$BASE
BASE=http://127.0.0.1:$(grep -o 'api_port=[0-9]*' "$WORK/standby.log" | head -n 1 | cut -d= -f2)
wait_for 20 "scrape 5; ge \$(metric 5 tarmac_ticks_total counter) 2" || fail "the second replica does not tick"
[ "$(metric 5 tarmac_leader gauge)" = 0 ] || fail "two leaders"
[ "$(metric 5 tarmac_tick_duration_seconds histogram @tarmac_tick_duration_seconds_count)" = 0 ] \
    || fail "a standby tick was timed"
for op in list launch terminate; do
    [ "$(metric 5 tarmac_provider_calls_total counter provider=sim op=$op)" = 0 ] || fail "the standby called the cloud"
done
BASE=$LEADER_BASE
scrape 6
for f in "tarmac_node_launches_total counter pool=od capacity_type=on_demand" \
         "tarmac_node_launch_failures_total counter pool=od" \
         "tarmac_spend_rate_cents_per_hour gauge pool=od" \
         "tarmac_gpu_utilisation_ratio gauge pool=od model=A100"; do
    # shellcheck disable=SC2086
    [ "$(metric 5 $f)" = "$(metric 6 $f)" ] || fail "replicas disagree on $f: $(metric 5 $f) and $(metric 6 $f)"
done
[ "$(metric 6 tarmac_leader gauge)" = 1 ] || fail "the leader stepped down"
grep -q "$TOKEN" "$WORK"/m*.txt "$WORK"/*.log && fail "the token leaked"

kill -TERM "$STANDBY"
wait "$STANDBY" || fail "the standby exited $? after SIGTERM"
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
echo "1 passed, 0 failed"
