#!/usr/bin/env bash
# The heartbeat's group commit (controller/api/heartbeat_batch.c,
# migrations/0012_heartbeat_batch.sql) against the real `tarmac serve`:
# 50 nodes, each its own agent token, send 20 heartbeats with 8 GPU samples
# each at once (one client thread per node), so that heartbeats share
# batches.  In the same burst one node names a GPU it lacks in some of its
# heartbeats (400 naming the sample, nothing of those stored), one reports
# a stale attempt of its job (ignored, the job stays running), one has its
# node terminated half-way (409 naming id from then on), and one hits a
# database error in some heartbeats (a trigger of this test): each is
# refused alone while every other heartbeat, its batch-mates included, is
# stored.  The stored sample count is exact for every node: 8 per 200.
# The batch function must have run, fewer times than there were
# heartbeats (pg_stat_user_functions).  Then one node's token floods
# samples: 429 past the node's budget, bounded rows, one log line.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_agent_hb_batch)
write_config "$WORK/c.yaml" 0 2s 1s 300ms
cat >>"$WORK/c.yaml" <<YAML
api:
  rate_per_token: 100000
  burst: 1000000
YAML
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>"$WORK/migrate.log" || fail "migrate"
# Counted per function from here (serve's connections start after this).
psql_q "ALTER DATABASE \"$(psql_q "SELECT current_database()")\" SET track_functions = 'pl'" >/dev/null
# The leader lock with a lease that never expires: serve only answers.
psql -X -q -d "$DB" -c "SELECT pg_advisory_lock(x'746d6c656164'::bigint)" \
    -c "UPDATE leader_lease SET expires_at = 'infinity'" -c "SELECT pg_sleep(170)" \
    >/dev/null 2>&1 &
PIDS+=("$!")
wait_for 10 '[ "$(psql_q "SELECT count(*) FROM pg_locks WHERE locktype = '"'advisory'"' AND granted")" -ge 1 ]' \
    || fail "could not take the leader lock"

psql_q "INSERT INTO nodes (pool, launch_token, instance_id, zone, instance_type, gpus, gpu_model,
          cpu_milli, memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms,
          billed_from_ms, ready_ms)
        SELECT 'od', 'tok-' || g, 'i-' || g, 'sim-1a', 'sim.8x', 8, 'A100', 96000, 1000000,
          'on_demand', 'ready', 32770000, 1, 1, 2 FROM generate_series(1, 50) g" >/dev/null
psql_q "SELECT id FROM nodes ORDER BY id" >"$WORK/ids"
# Agent tokens as enrollment stores them (the SHA-256, role agent, the node).
python3 - "$WORK" <<'PY'
import hashlib, os, secrets, sys
work = sys.argv[1]
with open(os.path.join(work, "ids")) as f, open(os.path.join(work, "tokens"), "w") as t, \
        open(os.path.join(work, "tokens.sql"), "w") as q:
    q.write("COPY api_tokens (name, role, hash, created_ms, node_id) FROM stdin;\n")
    for line in f:
        node = line.strip()
        tok = "tmk_" + secrets.token_hex(32)
        t.write(f"{node} {tok}\n")
        q.write(f"agent-{node}\tagent\t{hashlib.sha256(tok.encode()).hexdigest()}\t1\t{node}\n")
    q.write("\\.\n")
PY
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$WORK/tokens.sql" >/dev/null
mapfile -t IDS <"$WORK/ids"
BADGPU=${IDS[3]}
STALE=${IDS[17]}
ENDED=${IDS[29]}
FAULT=${IDS[41]}
# STALE runs job J at attempt 2 while its agent still claims attempt 1 as
# running (a stale attempt: ignored; every answer assigns attempt 2, so the
# agent kills its process), and job J2, which it reports finished in its
# sixth heartbeat (that answer finished 1; J2 assigned before, not after).
J=$(psql_q "INSERT INTO jobs (team, name, command, gpus, gpu_milli, state, attempts, node_id,
              submitted_ms, started_ms) VALUES ('vision', 'j', 'sleep 100', 2, 1000, 'running', 2,
              $STALE, 1, 2) RETURNING id" | head -n 1)
J2=$(psql_q "INSERT INTO jobs (team, name, command, gpus, gpu_milli, state, attempts, node_id,
               submitted_ms, started_ms) VALUES ('vision', 'j2', 'sleep 100', 2, 1000, 'running', 1,
               $STALE, 1, 2) RETURNING id" | head -n 1)
psql_q "INSERT INTO job_allocations (job_id, node_id, gpu_mask, gpu_milli, cpu_milli, memory_mib)
        VALUES ($J, $STALE, 3, 1000, 4000, 16384), ($J2, $STALE, 12, 1000, 4000, 16384)" >/dev/null
# A database error for FAULT's samples with util_percent 66.5 only: the
# batch function's per-item savepoint must keep it from the others.
psql_q "CREATE FUNCTION itest_fault() RETURNS trigger LANGUAGE plpgsql AS \$\$
        BEGIN
            IF NEW.node_id = $FAULT AND NEW.util_percent = 66.5 THEN
                RAISE EXCEPTION 'itest fault for node %', NEW.node_id;
            END IF;
            RETURN NEW;
        END \$\$;
        CREATE TRIGGER itest_fault BEFORE INSERT ON gpu_samples
            FOR EACH ROW EXECUTE FUNCTION itest_fault()" >/dev/null

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
wait_for 20 "curl -fsS http://127.0.0.1:$PORT/readyz >/dev/null 2>&1" || fail "the API never became ready"

# Sample times within the window the API accepts (agent.sample_max_age
# before its clock, agent.clock_skew after): ten minutes ago, a second apart.
export T0=$(( $(date +%s%3N) - 600000 ))
# The burst: prints, per node, "NODE count200 count400 count409 count500".
python3 - "$PORT" "$WORK/tokens" "$BADGPU" "$STALE" "$ENDED" "$FAULT" "$J" "$J2" "$DB" \
    >"$WORK/answers" 2>"$WORK/burst.log" <<'PY' || fail "the burst: $(tail -n 20 "$WORK/burst.log")"
import http.client, json, os, subprocess, sys, threading
port, tokfile = int(sys.argv[1]), sys.argv[2]
t0 = int(os.environ["T0"])
badgpu, stale, ended, fault, job, job2 = (int(x) for x in sys.argv[3:9])
db = sys.argv[9]
tokens = [l.split() for l in open(tokfile)]
start = threading.Barrier(len(tokens))
counts, errors = {}, []

def body(node, k):
    samples = [{"gpu_index": g, "at_ms": t0 + k * 1000, "util_percent": 37.5,
                "memory_used_mib": 1024, "memory_total_mib": 81920, "temperature_c": 41,
                "power_w": 180.5} for g in range(8)]
    doc = {"samples": samples}
    if node == badgpu and k % 4 == 1:
        samples.append(dict(samples[0], gpu_index=9))
    if node == fault and k % 5 == 2:
        samples[3]["util_percent"] = 66.5
    if node == stale:
        doc["running"] = [{"job_id": job, "attempt": 1, "pid": 42}]
        if k == 5:
            doc["jobs"] = [{"id": job2, "state": "succeeded", "reason": "exit 0"}]
    return json.dumps(doc)

def agent(node, tok):
    node = int(node)
    c = {200: 0, 400: 0, 409: 0, 500: 0}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    start.wait()
    for k in range(20):
        if node == ended and k == 10:
            subprocess.run(["psql", "-X", "-q", "-d", db, "-c",
                            f"UPDATE nodes SET state = 'terminated', terminated_ms = 4 WHERE id = {node}"],
                           check=True, stdout=subprocess.DEVNULL)
        conn.request("POST", f"/v1/nodes/{node}/heartbeat", body(node, k),
                     {"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
        r = conn.getresponse()
        text = r.read().decode()
        c[r.status] = c.get(r.status, 0) + 1
        doc = json.loads(text) if text else {}
        if r.status == 400 and doc.get("field") != "samples[8].gpu_index":
            errors.append(f"node {node}: 400 naming {doc.get('field')}: {text}")
        if r.status == 409 and doc.get("field") != "id":
            errors.append(f"node {node}: 409 naming {doc.get('field')}: {text}")
        if r.status == 200:
            if doc.get("samples") != 8:
                errors.append(f"node {node}: answer stored {doc.get('samples')} samples: {text}")
            a = doc.get("assignments")
            want = [] if node != stale else [[job, 2], [job2, 1]] if k < 5 else [[job, 2]]
            finished = 1 if node == stale and k == 5 else 0
            if a is None or [[x["job_id"], x["attempt"]] for x in a] != want or doc.get("finished") != finished:
                errors.append(f"node {node}: wrong assignments or finished: {text}")
    counts[node] = c

threads = [threading.Thread(target=agent, args=t) for t in tokens]
for t in threads:
    t.start()
for t in threads:
    t.join()
for e in errors[:20]:
    print(e, file=sys.stderr)
for node in sorted(counts):
    c = counts[node]
    print(node, c[200], c[400], c[409], c[500], sum(c.values()))
sys.exit(1 if errors or len(counts) != len(tokens) else 0)
PY

while read -r node ok c400 c409 c500 total; do
    [ "$total" = 20 ] || fail "node $node: $total answers, expected 20"
    case $node in
        "$BADGPU") want="15 5 0 0" ;;   # k % 4 == 1: 5 of 20 refused
        "$ENDED") want="10 0 10 0" ;;
        "$FAULT") want="16 0 0 4" ;;    # k % 5 == 2: 4 of 20 failed alone
        *) want="20 0 0 0" ;;
    esac
    [ "$ok $c400 $c409 $c500" = "$want" ] \
        || fail "node $node: answers 200/400/409/500 = $ok $c400 $c409 $c500, expected $want"
    stored=$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $node")
    [ "$stored" = $((ok * 8)) ] || fail "node $node: $stored samples stored for $ok answers 200"
done <"$WORK/answers"
[ "$(wc -l <"$WORK/answers")" = 50 ] || fail "not 50 nodes answered"
[ "$(psql_q "SELECT count(*) FROM gpu_samples")" = $(( (47 * 20 + 15 + 10 + 16) * 8 )) ] \
    || fail "the total of stored samples is not exact"
[ "$(psql_q "SELECT state || ' ' || attempts FROM jobs WHERE id = $J")" = "running 2" ] \
    || fail "a stale attempt's claim changed job $J"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J2")" = "succeeded" ] \
    || fail "job $J2, reported finished in the burst, is not succeeded"
# The faulty heartbeats changed nothing of their node; the last good one
# (k = 19) set its heartbeat time.
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $FAULT AND at_ms IN
             ($((T0 + 2000)), $((T0 + 7000)), $((T0 + 12000)), $((T0 + 17000)))")" = 0 ] \
    || fail "a failed heartbeat stored samples"
# Heartbeats shared statements: the batch function ran, and fewer times
# than the heartbeats that reached it (the first of each token goes the
# normal path, which authenticates it).
calls() { psql_q "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions WHERE funcname = 'tarmac_heartbeat_batch'"; }
wait_for 10 '[ "$(calls)" -gt 0 ]' || fail "tarmac_heartbeat_batch never ran"
CALLS=$(calls)
[ "$CALLS" -lt 900 ] || fail "tarmac_heartbeat_batch ran $CALLS times for 1000 heartbeats: no batching"
grep -q "heartbeat refused in its batch" "$WORK/serve.log" \
    || fail "the faulty items were not refused in their batch"

# ---- a flood from one node's token ----
# Twelve heartbeats of 2,048 samples each, as fast as answers come: the
# node's budget (one sample per GPU per agent.min_sample_period, beyond a
# burst of 4,096 that holds an agent's whole backlog) stores two, then
# answers 429 naming samples with Retry-After, stores nothing of those,
# and logs the refusals once for the node, not once per request.
read -r FLOOD FTOK < <(sed -n 8p "$WORK/tokens")
BEFORE=$(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $FLOOD")
python3 - "$PORT" "$FLOOD" "$FTOK" >"$WORK/flood" 2>"$WORK/flood.log" <<'PY' || fail "the flood: $(tail -n 5 "$WORK/flood.log")"
import http.client, json, os, sys
port, node, tok = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
t0 = int(os.environ["T0"]) + 100000
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
codes = []
for k in range(12):
    samples = [{"gpu_index": g, "at_ms": t0 + (k * 256 + i) * 10, "util_percent": 1,
                "memory_used_mib": 1} for i in range(256) for g in range(8)]
    conn.request("POST", f"/v1/nodes/{node}/heartbeat", json.dumps({"samples": samples}),
                 {"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    r = conn.getresponse()
    doc = json.loads(r.read().decode() or "{}")
    if r.status == 429 and (doc.get("field") != "samples" or not r.getheader("Retry-After")):
        sys.exit(f"a 429 without field samples or Retry-After: {doc}")
    codes.append(r.status)
print(codes.count(200), codes.count(429), len(codes))
PY
read -r F200 F429 FALL <"$WORK/flood"
[ "$F429" -ge 6 ] && [ $((F200 + F429)) = "$FALL" ] \
    || fail "the flood: $F200 answers 200 and $F429 answers 429 of $FALL, expected mostly 429"
FSTORED=$(( $(psql_q "SELECT count(*) FROM gpu_samples WHERE node_id = $FLOOD") - BEFORE ))
[ "$FSTORED" = $((F200 * 2048)) ] && [ "$FSTORED" -le $((3 * 2048)) ] \
    || fail "the flood stored $FSTORED samples for $F200 answers 200 (bounded: at most $((3 * 2048)))"
[ "$(grep -c "over the node's budget.*node=$FLOOD " "$WORK/serve.log")" = 1 ] \
    || fail "the refusals were not logged exactly once: $(grep -c "over the node's budget" "$WORK/serve.log") lines"
echo "ok: 1000 heartbeats from 50 nodes, $CALLS batch statements; a flood of $FALL: $F200 stored, $F429 refused"
