#!/usr/bin/env bash
# Power saving of an owned pool (docs/owned.md "Power saving"): `tarmac
# serve`, real `tarmac agent --join` machines with fake GPUs, a real
# PostgreSQL; suspend_command and resume_command are scripts that write
# what they were given to a file and stop or start the machine's agent, as
# a power switch would.
#  - idle past suspend_after, the machines are suspended, one at a time
#    (power_changes_max: 1); their silence marks nothing unreachable;
#  - suspended, a node is billed at suspended_cost_per_node_hour;
#  - a job that fits no powered node resumes one machine (and only one),
#    which heartbeats again, is on, and runs the job;
#  - a suspend_command that hangs is killed at command_timeout and one that
#    fails is reported; each is a decision, the node stays on, the command
#    is tried again later, and the tick runs on meanwhile; a resume_command
#    that fails leaves its node suspended, and the job still runs.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

E2E_PROVIDERS_YAML='  - name: site
    kind: owned
    region: lab'
OWNED="  - name: dgx
    provider: site
    gpu_model: A100
    gpus_per_node: 2
    max_nodes: 3
    cost_per_node_hour: \"3600.00\"
    suspended_cost_per_node_hour: \"36.00\"
    suspend_command: [\"$WORK/power.sh\", suspend]
    resume_command: [\"$WORK/power.sh\", resume]
    suspend_after: 2s
    power_changes_max: 1
    resume_timeout: 20s
    command_timeout: 2s"

e2e_start itest_owned_power local "" 50 "$OWNED"
# The power switch: logs "ACTION NODE ADDRESS in-flight=N" (N counts the
# switch's runs at once), then stops the machine's agent or starts it
# again.  $WORK/hang-suspend and $WORK/fail-suspend make a suspend hang or
# fail, $WORK/fail-resume the next resume fail once.
mkdir -p "$WORK/inflight"
cat >"$WORK/power.sh" <<SH
#!/usr/bin/env bash
set -u
action=\$1 node=\$2 addr=\${3:-}
mkdir "$WORK/inflight/\$node"
echo "\$action \$node \$addr in-flight=\$(ls "$WORK/inflight" | wc -l) env=\$TARMAC_NODE_ID/\$TARMAC_POWER" >>"$WORK/power.log"
sleep 1
if [ "\$action" = suspend ] && [ -e "$WORK/hang-suspend" ]; then
    rmdir "$WORK/inflight/\$node"
    sleep 60
fi
if [ "\$action" = resume ] && [ -e "$WORK/fail-resume" ]; then
    rm -f "$WORK/fail-resume"
    rmdir "$WORK/inflight/\$node"
    exit 4
fi
if [ "\$action" = suspend ] && [ -e "$WORK/fail-suspend" ]; then
    rmdir "$WORK/inflight/\$node"
    exit 3
fi
m=\$(cat "$WORK/node-\$node")
if [ "\$action" = suspend ]; then
    kill -9 "\$(cat "$WORK/m-\$m/pid")"
else
    setsid "$TARMAC" agent --join "$BASE" --pool dgx --join-token-file "$WORK/m-\$m/token.txt" \\
        --work-dir "$WORK/m-\$m/work" --gpu-fake "$WORK/m-\$m/gpus.json" $E2E_AGENT_ARGS \\
        >>"$WORK/m-\$m/agent.log" 2>&1 </dev/null &
    echo \$! >"$WORK/m-\$m/pid"
fi
rmdir "$WORK/inflight/\$node"
SH
chmod 755 "$WORK/power.sh"

jt() { "$TARMAC" join-token "$@" --config "$WORK/c.yaml"; }
power_of() { psql_q "SELECT power FROM nodes WHERE id = $1"; }
decisions() { psql_q "SELECT count(*) FROM decisions WHERE kind = '$1'"; }

TOK=$(jt create --pool dgx --uses 3 2>"$WORK/jt.err") || fail "join-token create: $(cat "$WORK/jt.err")"
gpus() { # FILE
    python3 - "$1" <<'PY'
import json, sys
json.dump({"gpus": [{"uuid": "GPU-p-%d" % i, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920,
                     "util_percent": 0} for i in range(2)]}, open(sys.argv[1], "w"))
PY
}
n=0
for m in a b c; do
    d=$WORK/m-$m
    mkdir -p "$d"
    chmod 711 "$d"
    printf '%s\n' "$TOK" >"$d/token.txt"
    gpus "$d/gpus.json"
    # shellcheck disable=SC2086
    setsid "$TARMAC" agent --join "$BASE" --pool dgx --join-token-file "$d/token.txt" \
        --work-dir "$d/work" --gpu-fake "$d/gpus.json" $E2E_AGENT_ARGS >>"$d/agent.log" 2>&1 </dev/null &
    echo $! >"$d/pid"
    n=$((n + 1))
    wait_for 20 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE pool = 'dgx'\")\" = $n ]" || fail "machine $m did not join: $(tail -5 "$d/agent.log")"
    # Which machine is which node: the newest node of the pool.
    echo "$m" >"$WORK/node-$(psql_q "SELECT max(id) FROM nodes WHERE pool = 'dgx'")"
done
NODES=$(psql_q "SELECT string_agg(id::text, ' ' ORDER BY id) FROM nodes WHERE pool = 'dgx'")

# Idle past suspend_after: all three suspended, never two at once.
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE pool = 'dgx' AND power = 'suspended'\")\" = 3 ]" \
    || fail "not all suspended: $(psql_q "SELECT id, power FROM nodes WHERE pool = 'dgx'") $(cat "$WORK/power.log" 2>/dev/null)"
[ "$(grep -c '^suspend ' "$WORK/power.log")" = 3 ] || fail "suspends: $(cat "$WORK/power.log")"
grep -q 'in-flight=[2-9]' "$WORK/power.log" && fail "more than power_changes_max at once: $(cat "$WORK/power.log")"
grep -qE '^suspend [0-9]+ [^ ]* in-flight=1 env=[0-9]+/suspend$' "$WORK/power.log" \
    || fail "the command did not get the node's id and address: $(cat "$WORK/power.log")"
[ "$(decisions node_suspended)" = 3 ] && [ "$(decisions node_suspending)" = 3 ] \
    || fail "decisions: $(psql_q "SELECT kind, reason FROM decisions WHERE subject_kind = 'node'")"
psql_q "SELECT reason FROM decisions WHERE kind = 'node_suspending' LIMIT 1" | grep -q 'suspend_after' \
    || fail "no reason: $(psql_q "SELECT reason FROM decisions WHERE kind = 'node_suspending'")"
psql_q "SELECT inputs ->> 'result' FROM decisions WHERE kind = 'node_suspended' LIMIT 1" | grep -q '^exited 0' \
    || fail "no result: $(psql_q "SELECT inputs FROM decisions WHERE kind = 'node_suspended'")"
for m in a b c; do
    kill -0 "$(cat "$WORK/m-$m/pid")" 2>/dev/null && fail "machine $m's agent still runs"
done
api GET '/v1/nodes?pool=dgx' | grep -q '"power" *: *"suspended"' || fail "the API does not show power"
TARMAC_TOKEN=$ADMIN "$TARMAC" nodes --pool dgx --url "$BASE" >"$WORK/nodes.out" 2>&1 || fail "tarmac nodes"
grep -q 'POWER' "$WORK/nodes.out" && grep -q ' suspended ' "$WORK/nodes.out" || fail "tarmac nodes: $(cat "$WORK/nodes.out")"

# Silent past agent.unreachable_after (3 s) and requeue_after: expected,
# so nothing unreachable, nothing requeued or fenced.
sleep 6
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'dgx' AND (unreachable_ms IS NOT NULL OR state <> 'ready')")" = 0 ] \
    || fail "a suspended node went unreachable: $(psql_q "SELECT id, state, unreachable_ms FROM nodes WHERE pool = 'dgx'")"
[ "$(decisions node_unreachable)" = 0 ] || fail "a node_unreachable decision"

# The ledger: 36 $/h is a cent a second, against 100 at the full rate.
S=$(echo "$NODES" | cut -d' ' -f1)
wait_for 20 "[ \"\$(psql_q \"SELECT accrued_to_ms - power_since_ms >= 4000 FROM nodes WHERE id = $S\")\" = t ]" \
    || fail "no accrual while suspended"
[ "$(psql_q "SELECT price_uusd_per_hour FROM nodes WHERE id = $S")" = 36000000 ] || fail "the suspended rate not set"
rate=$(psql_q "SELECT round(coalesce(sum(s.cents), 0) * 1000.0 / (n.accrued_to_ms - n.power_since_ms), 2)
                FROM nodes n LEFT JOIN spend s ON s.node_id = n.id AND s.at_ms > n.power_since_ms
               WHERE n.id = $S GROUP BY n.id")
python3 -c "import sys; r = float('$rate'); sys.exit(0 if 0.5 <= r <= 2 else 1)" \
    || fail "suspended node billed $rate cents/s, not about 1"

# A job needs a machine: one (only one) is resumed, comes back and runs it.
J=$(submit '{"team":"vision","gpus":2,"pool":"dgx","command":"echo powered"}')
wait_job "$J" succeeded 60
R=$(node_of_job "$J")
[ "$(grep -c '^resume ' "$WORK/power.log")" = 1 ] || fail "resumes: $(cat "$WORK/power.log")"
grep -q "^resume $R " "$WORK/power.log" || fail "the job ran on $R, not the resumed node: $(cat "$WORK/power.log")"
[ "$(decisions node_resuming)" = 1 ] && [ "$(decisions node_resumed)" = 1 ] \
    || fail "resume decisions: $(psql_q "SELECT kind, reason FROM decisions WHERE kind LIKE 'node_resum%'")"
psql_q "SELECT reason FROM decisions WHERE kind = 'node_resuming'" | grep -q "job $J" \
    || fail "the resume does not name its job"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'dgx' AND power = 'suspended'")" = 2 ] \
    || fail "others resumed: $(psql_q "SELECT id, power FROM nodes WHERE pool = 'dgx'")"

# Idle again: its suspend hangs, is killed at command_timeout (2 s), and
# the node stays on; the tick runs on meanwhile (the ledger's accrual is
# the tick's).
touch "$WORK/hang-suspend"
wait_for 30 "[ \"\$(decisions power_failed)\" -ge 1 ]" || fail "the hanging suspend was not reported: $(tail -3 "$WORK/power.log")"
psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed' ORDER BY id LIMIT 1" \
    | grep -q "killed at the pool's command_timeout of 2 s" || fail "why: $(psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed'")"
[ "$(power_of "$R")" = on ] || fail "after a hung suspend the node is $(power_of "$R")"
T0=$(psql_q "SELECT accrued_to_ms FROM nodes WHERE id = $R")
wait_for 10 "[ \"\$(psql_q \"SELECT accrued_to_ms > $T0 FROM nodes WHERE id = $R\")\" = t ]" || fail "the tick stopped"
# It fails next (tried again after its backoff), then works.
rm -f "$WORK/hang-suspend"
touch "$WORK/fail-suspend"
wait_for 40 "[ \"\$(decisions power_failed)\" -ge 2 ]" || fail "the failing suspend was not retried or reported"
psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed' ORDER BY id DESC LIMIT 1" | grep -q 'exited 3' \
    || fail "why: $(psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed'")"
[ "$(power_of "$R")" = on ] || fail "after a failed suspend the node is $(power_of "$R")"
rm -f "$WORK/fail-suspend"
wait_for 60 "[ \"\$(power_of $R)\" = suspended ]" || fail "not suspended after the failures: $(power_of "$R")"

# A resume that fails: reported, the node back to suspended (and its
# rate), and the job still gets a machine (another, or the same one after
# its backoff).
touch "$WORK/fail-resume"
F=$(decisions power_failed)
J2=$(submit '{"team":"vision","gpus":2,"pool":"dgx","command":"echo again"}')
wait_for 30 "[ \"\$(decisions power_failed)\" -gt $F ]" || fail "the failing resume was not reported"
psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed' ORDER BY id DESC LIMIT 1" | grep -q 'resume_command exited 4.*stays suspended' \
    || fail "why: $(psql_q "SELECT reason FROM decisions WHERE kind = 'power_failed' ORDER BY id DESC LIMIT 1")"
FN=$(psql_q "SELECT subject_id FROM decisions WHERE kind = 'power_failed' ORDER BY id DESC LIMIT 1")
wait_for 10 "[ \"\$(power_of $FN)\" = suspended ]" || fail "after a failed resume the node is $(power_of "$FN")"
[ "$(psql_q "SELECT price_uusd_per_hour FROM nodes WHERE id = $FN")" = 36000000 ] || fail "not back to the suspended rate"
wait_job "$J2" succeeded 60
grep -q 'in-flight=[2-9]' "$WORK/power.log" && fail "more than power_changes_max at once: $(cat "$WORK/power.log")"
grep -rqF -- "$TOK" "$WORK"/*.log "$WORK/serve.out" && fail "the join token reached a log"
echo "1 passed, 0 failed"
