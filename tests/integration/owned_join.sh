#!/usr/bin/env bash
# Owned machines join a pool with a join token (docs/owned.md): `tarmac
# serve` with a local cloud pool and an owned pool, real `tarmac agent
# --join` processes with fake GPUs, a real PostgreSQL.
#  - refusals write nothing: an unknown, revoked, expired or spent token, a
#    token for another pool, a machine of the wrong shape (its agent exits
#    with the difference named), a pool that is not owned or full;
#  - a joined machine runs a job, is killed -9 and restarted: same node, no
#    second use of the token;
#  - idle past its pool's grace, the owned node is never terminated, and the
#    ledger charges its idle hours;
#  - a machine that comes back with other hardware is cordoned, and the
#    decision says why, and uncordoning it accepts the new report; a flood
#    of joins is limited and logged once; no
#    join token or node key reaches a log.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

E2E_PROVIDERS_YAML='  - name: site
    kind: owned
    region: lab'
OWNED='  - name: dgx
    provider: site
    gpu_model: A100
    gpus_per_node: 2
    max_nodes: 1
    idle_grace: 1s
    cost_per_node_hour: "3600.00"
  - name: rack
    provider: site
    gpu_model: A100
    gpus_per_node: 2
    max_nodes: 4
    cost_per_node_hour: "1.00"'
e2e_start itest_owned_join local "" 50 "$OWNED"

jt() { "$TARMAC" join-token "$@" --config "$WORK/c.yaml"; }
nodes_in() { psql_q "SELECT count(*) FROM nodes WHERE pool = '$1'"; }
uses_of() { psql_q "SELECT uses FROM join_tokens WHERE id = $1"; }

# A token for a pool tarmac buys is refused by name.
if jt create --pool od >/dev/null 2>"$WORK/jt.err"; then fail "a join token for a cloud pool"; fi
grep -q 'pool "od" is not owned' "$WORK/jt.err" || fail "no reason: $(cat "$WORK/jt.err")"

TOK=$(jt create --pool dgx --uses 1 2>"$WORK/jt.err") || fail "join-token create: $(cat "$WORK/jt.err")"
TOK_ID=$(psql_q "SELECT max(id) FROM join_tokens")
REV=$(jt create --pool dgx 2>/dev/null)
REV_ID=$(psql_q "SELECT max(id) FROM join_tokens")
jt revoke --id "$REV_ID" >/dev/null || fail "join-token revoke"
EXP=$(jt create --pool dgx --ttl 1s 2>/dev/null)
jt list | grep -qE "^$REV_ID +dgx .* revoked$" || fail "list: $(jt list)"
sleep 1.2

# join BODY: the HTTP status, the answer in $WORK/join.out
hw='{"gpus":2,"gpu_model":"A100","gpu_memory_mib":81920,"cpus":8,"memory_mib":16384}'
join() {
    curl -sS -o "$WORK/join.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data "$1" "$BASE/v1/agent/join"
}
refused() { # STATUS FIELD BODY
    local got
    got=$(join "$3")
    [ "$got" = "$1" ] || fail "want $1 for $3, got $got: $(cat "$WORK/join.out")"
    grep -q "\"field\":\"$2\"" "$WORK/join.out" || fail "no field $2: $(cat "$WORK/join.out")"
    [ "$(nodes_in dgx)$(nodes_in rack)" = 00 ] || fail "a refused join wrote a node"
    [ "$(uses_of "$TOK_ID")" = 0 ] || fail "a refused join spent a use"
}
KEY=0123456789abcdef0123456789abcdef-a
refused 401 join_token "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"nope\",\"hardware\":$hw}"
refused 401 join_token "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$REV\",\"hardware\":$hw}"
grep -q revoked "$WORK/join.out" || fail "revoked not said: $(cat "$WORK/join.out")"
refused 401 join_token "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$EXP\",\"hardware\":$hw}"
grep -q expired "$WORK/join.out" || fail "expired not said: $(cat "$WORK/join.out")"
refused 403 pool "{\"pool\":\"rack\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK\",\"hardware\":$hw}"
refused 400 pool "{\"pool\":\"od\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK\",\"hardware\":$hw}"
refused 400 node_key "{\"pool\":\"dgx\",\"node_key\":\"short\",\"join_token\":\"$TOK\",\"hardware\":$hw}"
refused 400 hardware.gpus "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK\",\"hardware\":{\"gpus\":\"2\"}}"
# More GPUs than the pool's nodes have: refused with the difference.
refused 400 hardware "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK\",\"hardware\":{\"gpus\":4,\"gpu_model\":\"A100\",\"gpu_memory_mib\":1,\"cpus\":8,\"memory_mib\":16384}}"
grep -q 'pool dgx wants 2 x A100, machine has 4 x A100' "$WORK/join.out" || fail "shape: $(cat "$WORK/join.out")"

# A machine: a fake GPU file, a work folder, a token file.
gpus() { # FILE COUNT NAME MEMORY
    python3 - "$@" <<'PY'
import json, sys
path, n, name, mem = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
json.dump({"gpus": [{"uuid": "GPU-owned-%d" % i, "name": name, "memory_total_mib": mem,
                     "util_percent": 0} for i in range(n)]}, open(path, "w"))
PY
}
machine() { # NAME: starts its agent in the background, prints its pid
    local d=$WORK/m-$1
    # shellcheck disable=SC2086
    setsid "$TARMAC" agent --join "$BASE" --pool dgx --join-token-file "$d/token.txt" \
        --work-dir "$d/work" --gpu-fake "$d/gpus.json" $E2E_AGENT_ARGS >>"$d/agent.log" 2>&1 </dev/null &
    echo $!
}
for m in a b; do
    mkdir -p "$WORK/m-$m"
    chmod 711 "$WORK/m-$m"
    printf '%s\n' "$TOK" >"$WORK/m-$m/token.txt"
done
# The wrong shape through a real agent: it exits, naming the difference.
gpus "$WORK/m-b/gpus.json" 4 "NVIDIA H100 80GB HBM3" 81559
PB=$(machine b)
wait_for 20 "! kill -0 $PB 2>/dev/null" || fail "the wrong-shape agent did not exit"
grep -q 'pool dgx wants 2 x A100, machine has 4 x H100' "$WORK/m-b/agent.log" \
    || fail "the agent did not say why: $(tail -5 "$WORK/m-b/agent.log")"
[ "$(nodes_in dgx)" = 0 ] && [ "$(uses_of "$TOK_ID")" = 0 ] || fail "the wrong shape wrote something"

gpus "$WORK/m-a/gpus.json" 2 "NVIDIA A100-SXM4-80GB" 81920
PA=$(machine a)
wait_for 20 "[ \"\$(nodes_in dgx)\" = 1 ]" || fail "machine a did not join: $(tail -5 "$WORK/m-a/agent.log")"
N=$(psql_q "SELECT id FROM nodes WHERE pool = 'dgx'")
[ "$(psql_q "SELECT state || ' ' || gpus || ' ' || gpu_model || ' ' || price_uusd_per_hour || ' ' || coalesce(instance_id, '-') FROM nodes WHERE id = $N")" = "ready 2 A100 3600000000 -" ] \
    || fail "the joined node: $(psql_q "SELECT * FROM nodes WHERE id = $N")"
[ "$(uses_of "$TOK_ID")" = 1 ] || fail "the join did not spend its use"
# The token is spent: another machine's key cannot use it again.
refused_spent=$(join "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK\",\"hardware\":$hw}")
[ "$refused_spent" = 401 ] && grep -q 'no uses left' "$WORK/join.out" || fail "spent: $(cat "$WORK/join.out")"
[ "$(nodes_in dgx)" = 1 ] || fail "a spent token made a node"
# The pool's max_nodes (1) bounds the joins, with a valid token too.
TOK2=$(jt create --pool dgx 2>/dev/null)
[ "$(join "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"$TOK2\",\"hardware\":$hw}")" = 403 ] \
    && grep -q 'max_nodes' "$WORK/join.out" || fail "max_nodes: $(cat "$WORK/join.out")"
[ "$(nodes_in dgx)" = 1 ] && [ "$(psql_q "SELECT uses FROM join_tokens WHERE hash IS NOT NULL ORDER BY id DESC LIMIT 1")" = 0 ] \
    || fail "a join past max_nodes wrote something"
api GET '/v1/nodes?pool=dgx' | grep -qE '"id" *: *'"$N"'[,}]' || fail "tarmac nodes does not show the owned node"

# A job runs on it.
J=$(submit '{"team":"vision","gpus":2,"pool":"dgx","command":"echo owned"}')
wait_job "$J" succeeded 40
[ "$(node_of_job "$J")" = "$N" ] || fail "job $J ran on node $(node_of_job "$J"), not $N"

# Killed with -9 while a job runs and restarted: the same node, no second
# use, and the job adopted, finishing once.
mkdir -p "$WORK/marks" && chmod 1777 "$WORK/marks"
K=$(submit "{\"team\":\"vision\",\"gpus\":2,\"pool\":\"dgx\",\"command\":\"echo run >> $WORK/marks/k; sleep 6; echo again\"}")
wait_job "$K" running 40
wait_for 10 "[ -s $WORK/marks/k ]" || fail "job $K never ran"
kill -9 "$PA"
PA=$(machine a)
wait_for 20 "grep -q 'rejoined' $WORK/m-a/agent.log" || fail "no rejoin: $(tail -5 "$WORK/m-a/agent.log")"
[ "$(nodes_in dgx)" = 1 ] && [ "$(uses_of "$TOK_ID")" = 1 ] || fail "the restart made a node or spent a use"
wait_job "$K" succeeded 40
[ "$(node_of_job "$K")" = "$N" ] || fail "after the restart job $K ran elsewhere"
[ "$(wc -l <"$WORK/marks/k")" = 1 ] && [ "$(psql_q "SELECT attempts FROM jobs WHERE id = $K")" = 1 ] \
    || fail "the adopted job ran again: $(cat "$WORK/marks/k")"

# Idle past its grace (1 s) for several passes: never terminated, and its
# idle hours are charged (3600 $/h is a dollar a second).
sleep 4
[ "$(psql_q "SELECT state FROM nodes WHERE id = $N")" = ready ] || fail "the idle owned node left ready"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'terminate' AND subject_id = '$N'")" = 0 ] \
    || fail "a terminate decision for the owned node"
wait_for 20 "[ \"\$(psql_q \"SELECT coalesce(sum(cents), 0) >= 100 FROM spend WHERE node_id = $N AND kind = 'idle'\")\" = t ]" \
    || fail "idle spend: $(psql_q "SELECT kind, sum(cents) FROM spend WHERE node_id = $N GROUP BY kind")"
# ... and the spend report shows it as the pool's idle spend, on kind owned.
api GET /v1/spend | python3 -c '
import json, sys
d = json.load(sys.stdin)
pool = [p for p in d["pools"] if p["pool"] == "dgx"]
prov = [p for p in d["providers"] if p.get("provider_kind") == "owned"]
sys.exit(0 if pool and pool[0]["idle_cents"] >= 100 and prov and prov[0]["idle_cents"] >= 100 else 1)' \
    || fail "spend: $(api GET /v1/spend)"

# Back with other hardware: cordoned, the decision says why.
kill -9 "$PA"
gpus "$WORK/m-a/gpus.json" 2 "NVIDIA A100-SXM4-40GB" 40960
PA=$(machine a)
wait_for 20 "[ \"\$(psql_q \"SELECT cordoned FROM nodes WHERE id = $N\")\" = t ]" || fail "not cordoned"
psql_q "SELECT reason FROM decisions WHERE kind = 'cordon' AND subject_id = '$N'" | grep -q 'other hardware' \
    || fail "no cordon decision: $(psql_q "SELECT kind, reason FROM decisions WHERE subject_id = '$N'")"
# Uncordoned: the new report is the node's; the next start cordons nothing.
api POST "/v1/nodes/$N/uncordon" '{"reason":"checked the GPUs"}' >/dev/null || fail "uncordon"
[ "$(psql_q "SELECT NOT cordoned AND hardware ->> 'gpu_memory_mib' = '40960' AND hardware_reported IS NULL FROM nodes WHERE id = $N")" = t ] \
    || fail "uncordon did not accept the report: $(psql_q "SELECT cordoned, hardware, hardware_reported FROM nodes WHERE id = $N")"
kill -9 "$PA"
PA=$(machine a)
wait_for 20 "[ \"\$(grep -c rejoined $WORK/m-a/agent.log)\" -ge 3 ]" || fail "no third rejoin"
[ "$(psql_q "SELECT cordoned FROM nodes WHERE id = $N")" = f ] || fail "cordoned again with the accepted report"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'cordon' AND subject_id = '$N'")" = 1 ] \
    || fail "a second cordon decision"
kill -9 "$PA"

# A flood of joins from one address: limited (429), nothing written, and
# the log says so once a minute per address, not once per attempt.
limited=0
for _ in $(seq 1 80); do
    [ "$(join "{\"pool\":\"dgx\",\"node_key\":\"$KEY\",\"join_token\":\"flood\",\"hardware\":$hw}")" = 429 ] \
        && limited=$((limited + 1))
done
[ "$limited" -gt 0 ] || fail "80 joins at once were never limited"
[ "$(nodes_in dgx)" = 1 ] || fail "the flood wrote a node"
[ "$(grep -c 'api refused enrollment attempts' "$WORK/serve.log")" -le 2 ] \
    || fail "the refusals were logged per attempt: $(grep -c 'api refused enrollment attempts' "$WORK/serve.log")"

for s in "$TOK" "$(cat "$WORK/m-a/work/node_key")" "$(cat "$WORK/m-a/work/token")"; do
    grep -rqF -- "$s" "$WORK"/*.log "$WORK/serve.out" "$WORK"/m-*/agent.log && fail "a secret reached a log"
    [ "$(psql_q "SELECT count(*) FROM decisions WHERE reason LIKE '%$s%' OR inputs::text LIKE '%$s%'")" = 0 ] \
        || fail "a secret reached the decisions"
done
echo "1 passed, 0 failed"
