#!/usr/bin/env bash
# Every byte of a job's output through logs.store: s3 (docs/logs.md), with
# the local provider and moto's S3 server checking every signature: 20 MB
# of binary output read back whole with `tarmac logs` after its node was
# released (sha256), its bytes in the bucket and none in the index rows;
# a chunk the index refuses leaves no object; an agent killed -9 in the middle of its job's output and restarted ships
# the rest with no gap and no byte twice; no S3 secret in any log.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"
. "$TM_SOURCE_DIR/tests/lib/logs_s3.sh"
logs_s3_start

E2E_IDLE_GRACE=1s
e2e_start itest_agent_logs_s3 local "" 50 "logs:
  max_chunk: 65536
$LOGS_S3_YAML"
T=$WORK/logs
mkdir -p "$T"
chmod 755 "$T"
cat >"$T/gen.py" <<'PY'
import random, sys
# Deterministic bytes of every value (not UTF-8), written in odd sizes.
r = random.Random(int(sys.argv[2]))
left = int(sys.argv[1])
out = sys.stdout.buffer
while left > 0:
    n = min(left, r.randint(1, 300000))
    out.write(r.randbytes(n))
    left -= n
out.flush()
PY
chmod 644 "$T/gen.py"
python3 "$T/gen.py" 20000000 11 | sha256sum | cut -d' ' -f1 >"$T/want20"

logs() { TARMAC_TOKEN=$ADMIN "$TARMAC" logs --url "$BASE" "$@"; }

# 20 MB of binary output, read back from the bucket after the node is gone.
J=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"python3 $T/gen.py 20000000 11\"}")
wait_job "$J" succeeded 120
N=$(psql_q "SELECT node_id FROM job_log_streams WHERE job_id = $J")
[ -n "$N" ] || fail "no log stream for job $J: $(psql_q "SELECT * FROM job_log_streams")"
wait_for 60 "[ \"\$(psql_q \"SELECT state FROM nodes WHERE id = $N\")\" = terminated ]" \
    || fail "node $N was not released: $(psql_q "SELECT state FROM nodes WHERE id = $N")"
logs "$J" >"$T/got20" 2>"$T/got20.err" || fail "tarmac logs $J failed: $(cat "$T/got20.err")"
[ "$(sha256sum <"$T/got20" | cut -d' ' -f1)" = "$(cat "$T/want20")" ] \
    || fail "job $J's output differs: $(stat -c %s "$T/got20") bytes, stream $(psql_q "SELECT next_offset, stored_bytes, dropped_bytes FROM job_log_streams WHERE job_id = $J")"
[ "$(psql_q "SELECT next_offset FROM job_log_streams WHERE job_id = $J")" = 20000000 ] || fail "stream length"
# The bytes are in the bucket, one object per indexed chunk, none in PostgreSQL.
ROWS=$(psql_q "SELECT count(*) FROM job_log_chunks WHERE job_id = $J")
[ "$(psql_q "SELECT count(*) FROM job_log_chunks WHERE job_id = $J AND data IS NOT NULL")" = 0 ] \
    || fail "the s3 store left bytes in the index rows"
OBJS=$(s3py count "itest-$J-") || fail "could not list the bucket"
[ "$OBJS" = "$ROWS" ] || fail "job $J: $ROWS index rows but $OBJS objects"
# A chunk the index refuses (here one that skips ahead of the stream)
# writes nothing to the bucket: the checks come before the put.
A=$(psql_q "SELECT attempt FROM job_log_streams WHERE job_id = $J")
CODE=$(curl -sS -o "$T/refused" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" \
    -H 'Content-Type: application/json' \
    -d "{\"chunks\":[{\"job\":$J,\"attempt\":$A,\"rank\":0,\"offset\":30000000,\"data\":\"cmVmdXNlZA==\"}]}" \
    "$BASE/v1/nodes/$N/logs")
[ "$CODE" = 409 ] && grep -q '"chunks\[0\].offset"' "$T/refused" || fail "a chunk past the stream's end: $CODE $(cat "$T/refused")"
[ "$(s3py count "itest-$J-")" = "$ROWS" ] || fail "a refused chunk left an object in the bucket"
logs "$J" --tail 1000 >"$T/tail20" || fail "tarmac logs --tail"
[ "$(tail -c 1000 "$T/got20" | sha256sum)" = "$(sha256sum <"$T/tail20")" ] || fail "--tail 1000 is not the last 1000 bytes"

# kill -9 of the agent in the middle of the output, then a restart.
J3=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"i=0; while [ \$i -lt 4000 ]; do i=\$((i+1)); echo \\\"line \$i of the output that must arrive once\\\"; [ \$((i % 100)) = 0 ] && sleep 0.1; done\"}")
wait_job "$J3" running 60
N3=$(node_of_job "$J3")
wait_for 20 "[ \"\$(psql_q \"SELECT coalesce(max(next_offset), 0) FROM job_log_streams WHERE job_id = $J3\")\" -gt 20000 ]" \
    || fail "job $J3's output never began to arrive"
P=$(agent_pid "$N3")
kill -9 "$P"
sleep 1
restart_agent "$N3"
wait_for 10 "[ \"\$(agent_pid $N3)\" != 0 ]" || fail "the agent did not come back"
wait_job "$J3" succeeded 60
logs "$J3" >"$T/kill" || fail "tarmac logs $J3"
seq 1 4000 | sed 's/.*/line & of the output that must arrive once/' >"$T/kill.want"
cmp "$T/kill" "$T/kill.want" || fail "after kill -9: $(wc -l <"$T/kill") lines, first difference above"
[ "$(psql_q "SELECT count(*) FROM job_log_streams WHERE job_id = $J3")" = 1 ] || fail "more than one stream"

logs_s3_secret_absent
secrets_absent
echo "1 passed, 0 failed"
