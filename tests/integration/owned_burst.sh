#!/usr/bin/env bash
# Owned first, the clouds for the overflow (docs/owned.md, "Burst"): `tarmac
# serve` with an owned pool and the local cloud's on-demand pool in one
# pool group (burst: after 2s), one owned machine joined with a real
# `tarmac agent --join` and fake GPUs, a real PostgreSQL.
#  - a job runs on the owned node; a second one, the owned pool full, waits
#    for owned capacity, then bursts: one cloud node is launched, the launch
#    decision names the burst (the constant wait, the projected owned start,
#    the price), and the job runs on the cloud node;
#  - the cloud node is released after its idle grace; the owned node stays;
#  - a burst rule on a group without cloud pools is refused by `tarmac
#    check config` and by serve, naming the field.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

E2E_PROVIDERS_YAML='  - name: site
    kind: owned
    region: lab'
E2E_OD_YAML='    group: g'
E2E_IDLE_GRACE=2s
OWNED='  - name: dgx
    provider: site
    gpu_model: A100
    gpus_per_node: 2
    max_nodes: 1
    idle_grace: 1s
    group: g
    cost_per_node_hour: "1.00"
pool_groups:
  - name: g
    burst: after 2s'
e2e_start itest_owned_burst local "" 50 "$OWNED"

# The owned machine joins.
TOK=$("$TARMAC" join-token create --config "$WORK/c.yaml" --pool dgx 2>"$WORK/jt.err") \
    || fail "join-token create: $(cat "$WORK/jt.err")"
M=$WORK/m-a
mkdir -p "$M" && chmod 711 "$M"
printf '%s\n' "$TOK" >"$M/token.txt"
python3 -c '
import json, sys
json.dump({"gpus": [{"uuid": "GPU-owned-%d" % i, "name": "NVIDIA A100-SXM4-80GB",
                     "memory_total_mib": 81920, "util_percent": 0} for i in range(2)]},
          open(sys.argv[1], "w"))' "$M/gpus.json"
# shellcheck disable=SC2086
setsid "$TARMAC" agent --join "$BASE" --pool dgx --join-token-file "$M/token.txt" \
    --work-dir "$M/work" --gpu-fake "$M/gpus.json" $E2E_AGENT_ARGS >>"$M/agent.log" 2>&1 </dev/null &
PIDS+=("$!")
wait_for 20 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE pool = 'dgx' AND state = 'ready'\")\" = 1 ]" \
    || fail "the owned machine did not join: $(tail -5 "$M/agent.log")"
N=$(psql_q "SELECT id FROM nodes WHERE pool = 'dgx'")

# The owned node takes the first job (nothing bought for it) ...
A=$(submit '{"team":"vision","gpus":2,"command":"sleep 60"}')
wait_job "$A" running 40
[ "$(node_of_job "$A")" = "$N" ] || fail "job $A went to node $(node_of_job "$A"), not the owned $N"
# ... the second waits for owned capacity, then bursts to the cloud.
B=$(submit '{"team":"vision","gpus":2,"command":"echo burst"}')
wait_job "$B" succeeded 60
CN=$(node_of_job "$B")
[ "$(psql_q "SELECT pool FROM nodes WHERE id = $CN")" = od ] || fail "job $B ran on node $CN, not a cloud one"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'od'")" = 1 ] || fail "more than one cloud node bought"
R=$(psql_q "SELECT reason FROM decisions WHERE kind = 'launch' ORDER BY id LIMIT 1")
for want in "job $B: burst on-demand at \$2.00/h" "projected owned start in" "the constant wait is 2 s"; do
    case "$R" in *"$want"*) ;; *) fail "the launch does not say \"$want\": $R" ;; esac
done
[ "$(psql_q "SELECT inputs ->> 'burst_job' FROM decisions WHERE kind = 'launch' ORDER BY id LIMIT 1")" = "$B" ] \
    || fail "the launch's inputs: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'launch' LIMIT 1")"

# The cloud node goes after its grace; the owned node stays, running A.
wait_for 40 "[ \"\$(psql_q \"SELECT state FROM nodes WHERE id = $CN\")\" = terminated ]" \
    || fail "the cloud node was not released: $(psql_q "SELECT state FROM nodes WHERE id = $CN")"
[ "$(psql_q "SELECT state FROM nodes WHERE id = $N")" = ready ] || fail "the owned node left ready"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $A")" = running ] || fail "job $A stopped"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'terminate' AND subject_id = '$N'")" = 0 ] \
    || fail "a terminate decision for the owned node"
# A burst rule on a group without cloud pools: `tarmac check config` and
# serve refuse it, naming the field.
# (the od pool leaves the group: only the owned pool is left in it)
sed -e '/^  - name: od$/,/^  - name: spot$/ { /^    group: g$/d }' "$WORK/c.yaml" >"$WORK/bad.yaml"
rc=0
"$TARMAC" check config --config "$WORK/bad.yaml" >"$WORK/check.out" 2>"$WORK/check.log" || rc=$?
[ "$rc" != 0 ] || fail "check config took a burst rule on a group without cloud pools"
grep -q '"pool_groups\[0\].burst": group "g" has no cloud pools' "$WORK/check.log" \
    || fail "check config did not name the field: $(cat "$WORK/check.log")"
rc=0
timeout 20 "$TARMAC" serve --config "$WORK/bad.yaml" >/dev/null 2>"$WORK/bad-serve.log" || rc=$?
if [ "$rc" = 0 ] || [ "$rc" = 124 ]; then fail "serve started with the bad rule"; fi
grep -q 'pool_groups\[0\].burst' "$WORK/bad-serve.log" || fail "serve did not name the field: $(cat "$WORK/bad-serve.log")"
echo "1 passed, 0 failed"
