#!/usr/bin/env bash
# Every byte of a job's output (docs/logs.md), with the local provider:
# 20 MB of binary output read back whole with `tarmac logs` after its node
# was released (sha256); `tarmac logs --follow` follows a running job to
# its end; a 2-node job's ranks each their own output; an agent killed -9 in the middle of its job's output and
# restarted ships the rest with no gap and no byte twice; another team's
# engineer gets 404; --tail and --rank; the bad input of the ingest and
# the read (another node's job, a stale attempt, an offset that skips
# ahead or overlaps, a chunk over logs.max_chunk, bad base64, a job that
# never ran, a follow held past logs.follow_limit): a clear error naming
# the field and nothing stored twice.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

E2E_IDLE_GRACE=1s
e2e_start itest_agent_logs local "" 50 "logs:
  max_chunk: 65536
  follow_limit: 2s"
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
python3 "$T/gen.py" 20000000 7 | sha256sum | cut -d' ' -f1 >"$T/want20"

logs() { TARMAC_TOKEN=${TOKEN:-$ADMIN} "$TARMAC" logs --url "$BASE" "$@"; }

# 20 MB of binary output, read back after the node is gone.
J=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"python3 $T/gen.py 20000000 7\"}")
wait_job "$J" succeeded 90
N=$(psql_q "SELECT node_id FROM job_log_streams WHERE job_id = $J")
[ -n "$N" ] || fail "no log stream for job $J: $(psql_q "SELECT * FROM job_log_streams")"
wait_for 60 "[ \"\$(psql_q \"SELECT state FROM nodes WHERE id = $N\")\" = terminated ]" \
    || fail "node $N was not released: $(psql_q "SELECT state FROM nodes WHERE id = $N")"
logs "$J" >"$T/got20" 2>"$T/got20.err" || fail "tarmac logs $J failed: $(cat "$T/got20.err")"
[ "$(sha256sum <"$T/got20" | cut -d' ' -f1)" = "$(cat "$T/want20")" ] \
    || fail "job $J's output differs: $(stat -c %s "$T/got20") bytes, stream $(psql_q "SELECT next_offset, stored_bytes, dropped_bytes FROM job_log_streams WHERE job_id = $J")"
[ "$(psql_q "SELECT next_offset FROM job_log_streams WHERE job_id = $J")" = 20000000 ] || fail "stream length"
# --tail: the last bytes only.
logs "$J" --tail 1000 >"$T/tail20" || fail "tarmac logs --tail"
[ "$(tail -c 1000 "$T/got20" | sha256sum)" = "$(sha256sum <"$T/tail20")" ] || fail "--tail 1000 is not the last 1000 bytes"

# --follow: a running job to its end.
J2=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"for i in 1 2 3 4 5 6 7 8; do echo line \$i; sleep 0.5; done\"}")
wait_job "$J2" running 60
logs "$J2" --follow >"$T/follow" 2>"$T/follow.err" || fail "tarmac logs --follow: $(cat "$T/follow.err")"
[ "$(cat "$T/follow")" = "$(printf 'line %s\n' 1 2 3 4 5 6 7 8)" ] || fail "--follow printed: $(cat "$T/follow")"
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J2")" = succeeded ] || fail "--follow ended before the job did"

# A job of two nodes: one stream per rank, --rank picks it.
JR=$(submit "{\"team\":\"vision\",\"gpus\":1,\"nodes\":2,\"pool\":\"od\",\"command\":\"echo rank \$TARMAC_NODE_RANK of \$TARMAC_NUM_NODES\"}")
wait_job "$JR" succeeded 90
[ "$(logs "$JR")" = "rank 0 of 2" ] && [ "$(logs "$JR" --rank 1)" = "rank 1 of 2" ] \
    || fail "the ranks' output: $(logs "$JR"; logs "$JR" --rank 1)"
[ "$(psql_q "SELECT string_agg(rank::text, ',' ORDER BY rank) FROM job_log_streams WHERE job_id = $JR")" = 0,1 ] \
    || fail "streams of the 2-node job: $(psql_q "SELECT * FROM job_log_streams WHERE job_id = $JR")"

# kill -9 of the agent in the middle of the output, then a restart.
J3=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"i=0; while [ \$i -lt 4000 ]; do i=\$((i+1)); echo \\\"line \$i of the output that must arrive once\\\"; [ \$((i % 100)) = 0 ] && sleep 0.25; done\"}")
wait_job "$J3" 'running|succeeded' 60
wait_for 20 "[ \"\$(psql_q \"SELECT coalesce(max(next_offset), 0) FROM job_log_streams WHERE job_id = $J3\")\" -gt 20000 ]" \
    || fail "job $J3's output never began to arrive"
N3=$(psql_q "SELECT node_id FROM job_log_streams WHERE job_id = $J3")
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J3")" = running ] || fail "job $J3 ended before its agent could be killed"
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

# Another team's engineer: 404, and nothing of the bytes.
OTHER=$("$TARMAC" token create --config "$WORK/c.yaml" --name eng-other --role engineer --team nlp 2>>"$WORK/token.log")
OWN=$("$TARMAC" token create --config "$WORK/c.yaml" --name eng-vision --role engineer --team vision 2>>"$WORK/token.log")
CODE=$(curl -sS -o "$T/other.out" -w '%{http_code}' -H "Authorization: Bearer $OTHER" "$BASE/v1/jobs/$J2/logs")
[ "$CODE" = 404 ] && ! grep -q 'line 1' "$T/other.out" || fail "another team's engineer: $CODE $(cat "$T/other.out")"
TOKEN=$OWN logs "$J2" >"$T/own" && [ "$(cat "$T/own")" = "$(cat "$T/follow")" ] || fail "the job's own team cannot read it"
! TOKEN=$OTHER logs "$J2" >/dev/null 2>"$T/other.err" && grep -q 404 "$T/other.err" || fail "tarmac logs as another team"

# The read's bad input.
code() { curl -sS -o "$T/out" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$@"; }
# A job that never ran (queued, held by a cordon of its own making: a row
# the scheduler cannot place, as no pool has its model).
Q=$(psql_q "INSERT INTO jobs (team, command, gpus, gpu_milli, gpu_model, submitted_ms) VALUES ('vision', 'true', 1, 1000, 'B200', 0) RETURNING id" | head -1)
[ "$(code "$BASE/v1/jobs/$Q/logs")" = 404 ] && grep -q '"attempt"' "$T/out" || fail "a job that never ran: $(cat "$T/out")"
[ "$(code "$BASE/v1/jobs/$J2/logs?rank=1")" = 404 ] && grep -q '"rank"' "$T/out" || fail "rank 1 of a 1-node job: $(cat "$T/out")"
[ "$(code "$BASE/v1/jobs/$J2/logs?attempt=9")" = 404 ] && grep -q '"attempt"' "$T/out" || fail "attempt 9: $(cat "$T/out")"
[ "$(code "$BASE/v1/jobs/$J2/logs?offset=99999")" = 400 ] && grep -q '"offset"' "$T/out" || fail "offset past the end: $(cat "$T/out")"
[ "$(code "$BASE/v1/jobs/$J2/logs?offset=-1")" = 400 ] && grep -q '"offset"' "$T/out" || fail "offset -1: $(cat "$T/out")"
[ "$(code "$BASE/v1/jobs/$J2/logs?follow=maybe")" = 400 ] && grep -q '"follow"' "$T/out" || fail "follow=maybe: $(cat "$T/out")"

# A follow held past logs.follow_limit (2s): answered with what it has, and says so.
J5=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"sleep 30\"}")
wait_job "$J5" running 60
N5=$(node_of_job "$J5")
curl -sS -D "$T/hdr" -o "$T/out" -H "Authorization: Bearer $ADMIN" "$BASE/v1/jobs/$J5/logs?follow=true" \
    || fail "the held follow failed"
grep -qi '^x-tarmac-follow: limit' "$T/hdr" && grep -qi '^x-tarmac-next-offset: 0' "$T/hdr" \
    || fail "a follow past its limit: $(cat "$T/hdr")"

# The ingest's bad input, as the admin (who may act for a node): nothing stored.
post() { curl -sS -o "$T/out" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
    --data "$2" "$BASE/v1/nodes/$1/logs"; }
A5=$(psql_q "SELECT attempts FROM jobs WHERE id = $J5")
OTHER_NODE=$(psql_q "SELECT id FROM nodes WHERE id <> $N5 ORDER BY id DESC LIMIT 1")
chunk() { echo "{\"chunks\":[{\"job\":$1,\"attempt\":$2,\"rank\":0,\"offset\":$3,\"data\":\"$4\"}]}"; }
[ "$(post "$OTHER_NODE" "$(chunk "$J5" "$A5" 0 aGVsbG8K)")" = 409 ] && grep -q 'chunks\[0\].job' "$T/out" \
    || fail "a chunk for another node's job: $(cat "$T/out")"
[ "$(post "$N5" "$(chunk "$J5" $((A5 + 1)) 0 aGVsbG8K)")" = 409 ] && grep -q 'chunks\[0\].attempt' "$T/out" \
    || fail "a stale attempt: $(cat "$T/out")"
[ "$(post "$N5" "$(chunk "$J5" "$A5" 5 aGVsbG8K)")" = 409 ] && grep -q 'chunks\[0\].offset' "$T/out" \
    || fail "a first chunk past 0: $(cat "$T/out")"
[ "$(post "$N5" "$(chunk "$J5" "$A5" 0 'aGVsbG8K!!')")" = 400 ] && grep -q 'chunks\[0\].data' "$T/out" \
    || fail "bad base64: $(cat "$T/out")"
BIG=$(head -c 70000 /dev/zero | base64 -w0)
[ "$(post "$N5" "$(chunk "$J5" "$A5" 0 "$BIG")")" = 400 ] && grep -q 'chunks\[0\].data' "$T/out" \
    || fail "a chunk over logs.max_chunk: $(head -c 300 "$T/out")"
[ "$(psql_q "SELECT count(*) FROM job_log_streams WHERE job_id = $J5")" = 0 ] || fail "a refused chunk opened a stream"
[ "$(post "$N5" "$(chunk "$J5" "$A5" 0 aGVsbG8K)")" = 200 ] || fail "a good chunk: $(cat "$T/out")"
[ "$(post "$N5" "$(chunk "$J5" "$A5" 0 aGVsbG8K)")" = 409 ] && grep -q '"next_offset":6' "$T/out" \
    || fail "an overlapping chunk: $(cat "$T/out")"
[ "$(post "$N5" "$(chunk "$J5" "$A5" 9 aGVsbG8K)")" = 409 ] && grep -q 'skips ahead' "$T/out" \
    || fail "a chunk that skips ahead: $(cat "$T/out")"
# Two chunks, the second bad: neither is stored.
[ "$(post "$N5" "{\"chunks\":[{\"job\":$J5,\"attempt\":$A5,\"rank\":0,\"offset\":6,\"data\":\"aGkK\"},{\"job\":$J5,\"attempt\":$A5,\"rank\":0,\"offset\":6,\"data\":\"aGkK\"}]}")" = 409 ] \
    && grep -q 'chunks\[1\].offset' "$T/out" || fail "a batch with a bad second chunk: $(cat "$T/out")"
[ "$(psql_q "SELECT next_offset || ' ' || (SELECT count(*) FROM job_log_chunks WHERE job_id = $J5) FROM job_log_streams WHERE job_id = $J5")" = "6 1" ] \
    || fail "refused chunks were stored: $(psql_q "SELECT * FROM job_log_streams WHERE job_id = $J5")"
[ "$(code "$BASE/v1/jobs/$J5/logs")" = 200 ] && [ "$(cat "$T/out")" = hello ] || fail "the stored chunk reads back: $(cat "$T/out")"
secrets_absent
echo "1 passed, 0 failed"
