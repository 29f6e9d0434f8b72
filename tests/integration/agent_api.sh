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
psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" -c "SELECT pg_sleep(170)" \
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
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N2,\"secret\":\"$S1\"}")" "another node's secret"
expect 401 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N3,\"secret\":\"$S3\"}")" "a terminated node's secret"
expect 400 "$(req POST /v1/agent/enroll "" "{\"node_id\":$N1}")" "an enrollment without a secret"
[ "$(psql_q "SELECT count(*) FROM api_tokens WHERE role = 'agent'")" = 1 ] || fail "not exactly one agent token"
[ "$(psql_q "SELECT node_id FROM api_tokens WHERE role = 'agent'")" = "$N1" ] || fail "agent token not bound to node $N1"

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
 "samples":[{"gpu_index":0,"at_ms":1700000000000,"util_percent":37.5,"memory_used_mib":1024,
  "memory_total_mib":81920,"temperature_c":41,"power_w":180.5,"processes":[{"pid":123,"used_memory_mib":900}]}],
 "running":[]}'
expect 200 "$(req POST "/v1/nodes/$N1/heartbeat" "$T1" "$HB")" "a heartbeat with samples"
[ "$(psql_q "SELECT uuid || ' ' || temperature_c || ' ' || power_w || ' ' || (processes -> 0 ->> 'pid')
             FROM gpu_samples WHERE node_id = $N1")" = "GPU-fake-0 41 180.5 123" ] \
    || fail "the sample was not stored with its uuid, temperature, power and processes"
BAD='{"samples":[{"gpu_index":1,"at_ms":1700000001000,"util_percent":1,"memory_used_mib":1},
 {"gpu_index":9,"at_ms":1700000001000,"util_percent":1,"memory_used_mib":1}]}'
R=$(req POST "/v1/nodes/$N1/heartbeat" "$T1" "$BAD")
expect 400 "$R" "a sample for a GPU the node lacks"
[ "$(field_of "$R")" = "samples[1].gpu_index" ] || fail "the bad sample was not named: $R"
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $N1")" = 1 ] || fail "a refused heartbeat stored samples"

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

# ---- no secret anywhere ----
for s in "$S1" "$S2" "$S3" "$T1"; do
    grep -rqF -- "$s" "$WORK"/*.log "$WORK/serve.out" && fail "a secret reached a log"
    [ "$(psql_q "SELECT count(*) FROM decisions WHERE reason LIKE '%$s%' OR inputs::text LIKE '%$s%'")" = 0 ] \
        || fail "a secret reached the decisions"
done
psql_q "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%pg_sleep%'" >/dev/null || true
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
echo "1 passed, 0 failed"
