#!/usr/bin/env bash
# The node agent's side of the API against the real `tarmac serve`:
# enrollment (single use, expiry, ended nodes refused), the agent role's
# binding to its node, heartbeats with samples (a GPU index the node lacks
# is refused naming the field, and nothing is stored), assignments with
# attempts, start/exit with attempt fencing (a stale attempt is 409 and
# changes nothing), exit codes and output tails recorded, `lost` requeued,
# an ended node's agent token refused, and the job spec's env and image.
#
# Deterministic as api_contract.sh is: this script holds the leader lock,
# so the replica under test only serves the API.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_agent_api)
write_config "$WORK/c.yaml" 0 2s 1s 300ms
cat >>"$WORK/c.yaml" <<YAML
api:
  rate_per_token: 100000
  burst: 1000000
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
# The leader lock with a lease that never expires (migrations/0011_lease.sql).
psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" \
    -c "UPDATE leader_lease SET expires_at = 'infinity'" -c "SELECT pg_sleep(170)" \
    >/dev/null 2>&1 &
PIDS+=("$!")
wait_for 10 '[ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = '"'advisory'"' AND granted")" -ge 1 ]' \
    || fail "could not take the leader lock"
ADMIN=$("$TARMAC" token create --config "$WORK/c.yaml" --name a-admin --role admin 2>>"$WORK/token.log") \
    || fail "token create"
"$TARMAC" token create --config "$WORK/c.yaml" --name a-agent --role agent >/dev/null 2>&1 \
    && fail "token create minted an agent token"

node() { # node STATE TAG: prints its id
    psql_q "INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
              cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms,
              billed_from_ms, ready_ms, terminated_ms)
            VALUES ('od', 'tok-$2', 'i-$2', 'sim-1a', 'sim.8x', 8, 'A100', 96000, 1000000,
              'on_demand', '$1', 32770000, 1, 1, 2,
              CASE WHEN '$1' IN ('terminated', 'interrupted') THEN 3 END) RETURNING id" | head -n 1
}
N1=$(node ready a1)
N2=$(node ready a2)
N3=$(node terminated a3)
NOW=$(date +%s%3N)
S1=tme_$(openssl rand -hex 32)
S2=tme_$(openssl rand -hex 32)
S3=tme_$(openssl rand -hex 32)
enroll_row() { # NODE SECRET EXPIRES_MS
    local h
    h=$(printf '%s' "$2" | sha256sum | cut -d' ' -f1)
    psql_q "INSERT INTO agent_enrollments (node_id, hash, created_ms, expires_ms)
            VALUES ($1, '$h', 1, $3)" >/dev/null
}
enroll_row "$N1" "$S1" $((NOW + 600000))
enroll_row "$N2" "$S2" $((NOW - 1000))
enroll_row "$N3" "$S3" $((NOW + 600000))

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"

# req METHOD PATH TOKEN [BODY]: prints "STATUS BODY"
req() {
    local out
    out=$(curl -sS -o "$WORK/body" -w '%{http_code}' -X "$1" ${3:+-H "Authorization: Bearer $3"} \
        ${4:+-H 'Content-Type: application/json' --data "$4"} "$BASE$2") || fail "curl $1 $2"
    echo "$out $(cat "$WORK/body")"
}
expect() { # WANT_STATUS "STATUS BODY" WHAT
    [ "${2%% *}" = "$1" ] || fail "$3: got ${2:0:300}, expected $1"
}
field_of() { python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1]).get("field"))' "$1"; }

# ---- enrollment ----
R=$(req POST /v1/agent/enroll "" "{\"node_id\":$N1,\"secret\":\"$S1\"}")
expect 201 "$R" "enrollment"
T1=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["token"])' "$R")
[ "${T1:0:4}" = tmk_ ] || fail "enrollment answered no token: $R"
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N1,\"secret\":\"$S1\"}")" "a reused secret"
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N2,\"secret\":\"$S2\"}")" "an expired secret"
# A second, valid secret for node 2 (a later launch attempt's).
S2B=tme_$(openssl rand -hex 32)
enroll_row "$N2" "$S2B" $((NOW + 600000))
R=$(req POST /v1/agent/enroll "" "{\"node_id\":$N2,\"secret\":\"$S2B\"}")
expect 201 "$R" "node 2's fresh secret"
T2=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["token"])' "$R")
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N2,\"secret\":\"$S1\"}")" "another node's secret"
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N3,\"secret\":\"$S3\"}")" "a terminated node's secret"
expect 400 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N1}")" "an enrollment without a secret"
[ "$(psql_q "SELECT string_agg(node_id::text, ' ' ORDER BY node_id) FROM api_tokens WHERE role = 'agent'")" = "$N1 $N2" ] \
    || fail "not one agent token each for nodes $N1 and $N2"

# ---- the agent role ----
expect 403 "$(req GET /v1/jobs "$T1")" "an agent token listing jobs"
expect 403 "$(req GET "/v1/nodes/$N1" "$T1")" "an agent token reading its node"
expect 403 "$(req POST "/v1/nodes/$N1/drain" "$T1" '{}')" "an agent token draining"
expect 403 "$(req POST "/v1/nodes/$N2/heartbeat" "$T1" '{}')" "an agent token on another node's heartbeat"
expect 403 "$(req POST "/v1/nodes/$N2/interruption" "$T1" '{}')" "an agent token on another node's notice"
expect 403 "$(req POST "/v1/nodes/$N2/jobs/1/start" "$T1" '{"attempt":1}')" "an agent token on another node's job"
expect 200 "$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{}')" "the agent's own heartbeat"
expect 200 "$(req POST "/v1/nodes/$N2/heartbeat" "$ADMIN" '{}')" "an admin heartbeat"

# ---- samples ----
HB='{"gpus":[{"index":0,"uuid":"GPU-fake-0","name":"Fake A100","memory_total_mib":81920}],
 "samples":[{"gpu_index":0,"at_ms":'"$NOW"',"util_percent":37.5,"memory_used_mib":1024,
  "memory_total_mib":81920,"temperature_c":41,"power_w":180.5,"processes":[{"pid":123,"used_memory_mib":900}]}],
 "running":[]}'
expect 200 "$(req POST "/v1/nodes/$N1/heartbeat" "$T1" "$HB")" "a heartbeat with samples"
[ "$(psql_q "SELECT uuid || ' ' || temperature_c || ' ' || power_w || ' ' || (processes -> 0 ->> 'pid')
             FROM gpu_samples WHERE node_id = $N1")" = "GPU-fake-0 41 180.5 123" ] \
    || fail "the sample was not stored with its uuid, temperature, power and processes"
BAD='{"samples":[{"gpu_index":1,"at_ms":'$((NOW + 1000))',"util_percent":1,"memory_used_mib":1},
 {"gpu_index":9,"at_ms":'$((NOW + 1000))',"util_percent":1,"memory_used_mib":1}]}'
R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" "$BAD")
expect 400 "$R" "a sample for a GPU the node lacks"
[ "$(field_of "$R")" = "samples[1].gpu_index" ] || fail "the bad sample was not named: $R"
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $N1")" = 1 ] || fail "a refused heartbeat stored samples"
# Sample times: from 2100 or 1970 refused naming the sample's at_ms
# (agent.clock_skew ahead, agent.sample_max_age behind); nothing stored.
ok_sample='{"gpu_index":1,"at_ms":'$((NOW + 2000))',"util_percent":1,"memory_used_mib":1}'
for at in 4102444800000 253402300799000 1000 $((NOW - 7 * 3600 * 1000)) $((NOW + 3600 * 1000)); do
    R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{"samples":['"$ok_sample"',{"gpu_index":0,"at_ms":'$at',"util_percent":1,"memory_used_mib":1}]}')
    expect 400 "$R" "a sample dated $at"
    [ "$(field_of "$R")" = "samples[1].at_ms" ] || fail "the sample dated $at was not named: $R"
done
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $N1")" = 1 ] || fail "a sample out of its time was stored"
# Floats inside the ranges that PostgreSQL's real cannot hold: stored as 0, never 500.
R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{"samples":[{"gpu_index":1,"at_ms":'$((NOW + 3000))',"util_percent":1e-320,
 "memory_used_mib":1,"temperature_c":1e-50,"power_w":1e-310}]}')
expect 200 "$R" "samples with floats that underflow a real"
[ "$(psql_q "SELECT util_percent || ' ' || temperature_c || ' ' || power_w FROM gpu_samples
             WHERE node_id = $N1 AND at_ms = $((NOW + 3000))")" = "0 0 0" ] || fail "the underflowing floats were not stored as 0"
# A nested field is named in full.
R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{"samples":[{"gpu_index":0,"util_percent":1,"memory_used_mib":1,"processes":[{"pid":"x"}]}]}')
expect 400 "$R" "a process with a bad pid"
[ "$(field_of "$R")" = "samples[0].processes[0].pid" ] || fail "the nested field was not named in full: $R"

# ---- assignments, start and exit ----
job() { # job NODE ATTEMPTS MASK: a running job on NODE; prints its id
    local id
    id=$(psql_q "INSERT INTO jobs (team, name, command, gpus, gpu_milli, state, attempts, node_id,
                   submitted_ms, started_ms, checkpointable, env)
                 VALUES ('vision', 'a', 'echo hi', 2, 1000, 'running', $2, $1, 1, 2, true,
                   '{\"K\":\"V\"}') RETURNING id" | head -n 1)
    psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib)
            VALUES ($id, $1, $3, 1000, 4000, 16384)" >/dev/null
    echo "$id"
}
J1=$(job "$N1" 2 3)
R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{}')
expect 200 "$R" "a heartbeat with an assignment"
python3 - "$R" "$J1" <<'PY' || fail "wrong assignments: $R"
import json, sys
doc = json.loads(sys.argv[1].split(" ", 1)[1])
a = doc["assignments"]
assert doc["node"]["state"] == "ready" and doc["node"]["draining"] is False, doc
assert len(a) == 1 and a[0]["job_id"] == int(sys.argv[2]) and a[0]["attempt"] == 2, a
assert a[0]["gpu_indices"] == [0, 1] and a[0]["env"] == {"K": "V"} and a[0]["command"] == "echo hi", a
assert a[0]["image"] is None and a[0]["cpu_milli"] == 4000 and a[0]["checkpointable"] is True, a
PY
R=$(req POST "/v1/nodes/$N1/jobs/$J1/start" "$T1" '{"attempt":1,"pid":99}')
expect 409 "$R" "a start for a stale attempt"
[ "$(field_of "$R")" = attempt ] || fail "the stale start did not name attempt: $R"
expect 200 "$(req POST "/v1/nodes/$N1/jobs/$J1/start" "$T1" '{"attempt":2,"pid":4242}')" "a start"
[ "$(psql_q "SELECT pid FROM jobs WHERE id = $J1")" = 4242 ] || fail "the start's pid was not recorded"
R=$(req POST "/v1/nodes/$N1/jobs/$J1/exit" "$T1" '{"attempt":1,"exit_code":0,"reason":"exited"}')
expect 409 "$R" "an exit for a stale attempt"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J1")" = running ] || fail "a stale exit changed the job"
expect 200 "$(req POST "/v1/nodes/$N1/jobs/$J1/exit" "$T1" \
    '{"attempt":2,"exit_code":3,"signal":null,"output_tail":"boom\n","reason":"exited"}')" "an exit"
[ "$(psql_q "SELECT state || ' ' || exit_code || ' ' || output_tail FROM jobs WHERE id = $J1")" = "failed 3 boom" ] \
    || fail "the exit was not recorded: $(psql_q "SELECT state, exit_code, output_tail FROM jobs WHERE id = $J1")"
[ "$(psql_q "SELECT inputs ->> 'exit_code' FROM decisions WHERE kind = 'job_failed' AND subject_id = '$J1'")" = 3 ] \
    || fail "the decision does not carry the exit code"
expect 409 "$(req POST "/v1/nodes/$N1/jobs/$J1/exit" "$T1" '{"attempt":2,"exit_code":3,"reason":"exited"}')" \
    "a second exit"
J2=$(job "$N1" 1 4)
expect 200 "$(req POST "/v1/nodes/$N1/jobs/$J2/exit" "$T1" '{"attempt":1,"reason":"lost"}')" "a lost job"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J2")" = queued ] || fail "a lost job was not requeued"
[ "$(psql_q "SELECT cause FROM job_interruptions WHERE job_id = $J2")" = lost ] || fail "no interruption row for the lost job"
J3=$(job "$N1" 1 8)
expect 200 "$(req POST "/v1/nodes/$N1/jobs/$J3/exit" "$T1" '{"attempt":1,"exit_code":0,"reason":"exited"}')" "an exit 0"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J3")" = succeeded ] || fail "exit 0 did not succeed the job"

# ---- the notice from the agent ----
expect 200 "$(req POST "/v1/nodes/$N1/interruption" "$T1" \
    "{\"reason\":\"aws spot instance-action terminate\",\"deadline_ms\":$((NOW + 120000))}")" "the agent's notice"
# The agent repeats its notice until answered, the cloud keeps announcing
# it: the same deadline is one decision.  A deadline in the past (1970,
# or beyond agent.clock_skew) is refused naming it.
for i in 1 2 3; do
    expect 200 "$(req POST "/v1/nodes/$N1/interruption" "$T1" \
        "{\"reason\":\"aws spot instance-action terminate\",\"deadline_ms\":$((NOW + 120000))}")" "a repeated notice"
done
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'interruption_notice' AND subject_id = '$N1'")" = 1 ] \
    || fail "a repeated notice wrote $(psql_q "SELECT count(*) FROM decisions WHERE kind = 'interruption_notice' AND subject_id = '$N1'") decisions"
for at in 1000 $((NOW - 600000)); do
    R=$(req POST "/v1/nodes/$N1/interruption" "$T1" "{\"deadline_ms\":$at}")
    expect 400 "$R" "a notice with a deadline in the past ($at)"
    [ "$(field_of "$R")" = deadline_ms ] || fail "the past deadline was not named: $R"
done
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'interruption_notice' AND subject_id = '$N1'")" = 1 ] \
    || fail "a refused notice wrote a decision"

# ---- the job spec's env and image ----
R=$(req POST /v1/jobs "$ADMIN" '{"team":"vision","gpus":1,"env":{"A":"1","B_2":"x y"},"image":"nvcr.io/nvidia/pytorch:24.01-py3"}')
expect 201 "$R" "a job with env and image"
JID=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1].split(" ",1)[1])["id"])' "$R")
python3 - "$(req GET "/v1/jobs/$JID" "$ADMIN")" <<'PY' || fail "env and image not returned"
import json, sys
doc = json.loads(sys.argv[1].split(" ", 1)[1])
assert doc["env"] == {"A": "1", "B_2": "x y"} and doc["image"] == "nvcr.io/nvidia/pytorch:24.01-py3", doc
PY
R=$(req POST /v1/jobs "$ADMIN" '{"team":"vision","gpus":1,"env":{"TARMAC_JOB_ID":"1"}}')
expect 400 "$R" "a job setting TARMAC_*"
[ "$(field_of "$R")" = env.TARMAC_JOB_ID ] || fail "the refused env entry was not named: $R"
R=$(req POST /v1/jobs "$ADMIN" '{"team":"vision","gpus":1,"env":{"1X":"1"}}')
expect 400 "$R" "a job with a bad env name"

# ---- an ended node's agent ----
psql_q "UPDATE nodes SET state = 'terminated', terminated_ms = 4 WHERE id = $N1" >/dev/null
expect 409 "$(req POST "/v1/nodes/$N1/heartbeat" "$T1" '{}')" "a terminated node's agent heartbeat"
expect 409 "$(req POST "/v1/nodes/$N1/jobs/$J1/start" "$T1" '{"attempt":2}')" "a terminated node's agent start"

# ---- a revoked agent token, cached by the heartbeat's fast path ----
expect 200 "$(req POST "/v1/nodes/$N2/heartbeat" "$T2" '{}')" "node 2's agent heartbeat"
psql_q "UPDATE api_tokens SET revoked = true WHERE node_id = $N2" >/dev/null
expect 401 "$(req POST "/v1/nodes/$N2/heartbeat" "$T2" '{}')" "a revoked agent token"

# ---- enrollment by brute force ----
# 300 wrong secrets from one address as fast as answers come: past the
# address's bucket (api.enroll_burst, then api.enroll_rate_per_address)
# they get 429 without a statement; the refusals are logged once for the
# address in the minute, with their counts, and no secret.
WRONG=tme_$(openssl rand -hex 32)
L0=$(grep -c 'api refused enrollment attempts' "$WORK/serve.log")
python3 - "$PORT" "$N2" "$WRONG" >"$WORK/brute" 2>"$WORK/brute.log" <<'PY' || fail "the brute force: $(tail -n 5 "$WORK/brute.log")"
import http.client, json, sys
port, node, wrong = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
codes = {}
for i in range(300):
    conn.request("POST", "/v1/agent/enroll", json.dumps({"node_id": node, "secret": wrong[:-4] + "%04d" % i}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    codes[r.status] = codes.get(r.status, 0) + 1
print(codes.get(401, 0), codes.get(429, 0), sum(codes.values()))
PY
read -r B401 B429 BALL <"$WORK/brute"
[ "$B429" -ge 200 ] && [ "$B401" -ge 1 ] && [ $((B401 + B429)) = "$BALL" ] \
    || fail "enrollment brute force: $B401 answers 401 and $B429 answers 429 of $BALL"
# The secrets refused earlier in this script may have logged the
# minute's line already: at most one more, and one at least in all.
L1=$(grep -c 'api refused enrollment attempts' "$WORK/serve.log")
[ "$L1" -ge 1 ] && [ $((L1 - L0)) -le 1 ] \
    || fail "the refused enrollments were not logged once a minute: $L0 lines before, $L1 after"
grep 'api refused enrollment attempts' "$WORK/serve.log" | grep -q 'addr=127.0.0.1 ' \
    || fail "the enrollment line does not name the address: $(grep 'api refused enrollment' "$WORK/serve.log")"
grep -qF -- "${WRONG:0:40}" "$WORK/serve.log" && fail "a tried secret reached the log"
echo "enrollment brute force: $B401 answers 401, $B429 answers 429 of $BALL; $((L1 - L0)) more log line(s)"

# ---- no secret anywhere ----
for s in "$S1" "$S2" "$S2B" "$S3" "$T1" "$T2"; do
    grep -rqF -- "$s" "$WORK"/*.log "$WORK/serve.out" && fail "a secret reached a log"
    [ "$(psql_q "SELECT count(*) FROM decisions WHERE reason LIKE '%$s%' OR inputs::text LIKE '%$s%'")" = 0 ] \
        || fail "a secret reached the decisions"
done
psql_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_sleep%'" >/dev/null || true
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
echo "1 passed, 0 failed"
