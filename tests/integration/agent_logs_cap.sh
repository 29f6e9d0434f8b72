#!/usr/bin/env bash
# A job's output past logs.max_bytes_per_job (here its least, 64 KiB): the
# head and the tail are kept and a marker says how many bytes were dropped
# between; the output past logs.retention is pruned by the leader, bytes
# and index.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

e2e_start itest_agent_logs_cap local "" 50 "logs:
  max_bytes_per_job: 65536
  max_chunk: 8192"
T=$WORK/cap
mkdir -p "$T"
# 6000 numbered lines of 52 bytes: 312,000 bytes, written over about 3 s.
J=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"i=0; while [ \$i -lt 6000 ]; do i=\$((i+1)); printf 'line %06d of a job that writes past its cap......\\\\n' \$i; [ \$((i % 500)) = 0 ] && sleep 0.2; done\"}")
wait_job "$J" succeeded 90
TARMAC_TOKEN=$ADMIN "$TARMAC" logs --url "$BASE" "$J" >"$T/out" 2>"$T/err" || fail "tarmac logs: $(cat "$T/err")"
read -r next stored dropped <<<"$(psql_q "SELECT next_offset || ' ' || stored_bytes || ' ' || dropped_bytes FROM job_log_streams WHERE job_id = $J")"
[ "$next" = 312000 ] || fail "the stream received $next bytes, want 312000"
[ "$dropped" -gt 0 ] && [ "$stored" -le $((65536 + 8192)) ] || fail "stored $stored, dropped $dropped: the cap did not hold"
[ $((stored + dropped)) = 312000 ] || fail "stored + dropped = $((stored + dropped))"
head -1 "$T/out" | grep -qx 'line 000001 of a job that writes past its cap......' || fail "the head is not kept: $(head -1 "$T/out")"
tail -1 "$T/out" | grep -qx 'line 006000 of a job that writes past its cap......' || fail "the tail is not kept: $(tail -1 "$T/out")"
grep -qx "\[tarmac: $dropped bytes dropped here: the output passed logs.max_bytes_per_job\]" "$T/out" \
    || fail "no marker naming $dropped dropped bytes: $(grep -a tarmac "$T/out")"
# Every byte served but the marker's line (and the newline before it) is
# the job's, in order: the head's lines, then the tail's.
[ $(( $(stat -c %s "$T/out") - $(grep -a '^\[tarmac:' "$T/out" | wc -c) - 1 )) = "$stored" ] \
    || fail "$(stat -c %s "$T/out") bytes served for $stored stored"
# The cut falls between chunks, not lines: at most the head's last line
# and the tail's first are partial.
[ "$(grep -av '^\[tarmac:' "$T/out" | grep -avc '^line [0-9]\{6\} of a job that writes past its cap\.\.\.\.\.\.$')" -le 2 ] \
    || fail "lines torn inside the head or the tail: $(grep -av '^line [0-9]\{6\} of' "$T/out" | head -5)"
CODE=$(curl -sS -D "$T/hdr" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$BASE/v1/jobs/$J/logs")
[ "$CODE" = 200 ] && grep -qi "^x-tarmac-dropped-bytes: $dropped" "$T/hdr" || fail "X-Tarmac-Dropped-Bytes: $(cat "$T/hdr")"

# Retention: output last written 15 days ago goes at the leader's next tick.
psql_q "UPDATE job_log_streams SET updated_ms = updated_ms - 15 * 86400000 WHERE job_id = $J" >/dev/null
wait_for 20 "[ \"\$(psql_q \"SELECT count(*) FROM job_log_streams WHERE job_id = $J\")\" = 0 ]" \
    || fail "the leader did not prune output past logs.retention"
[ "$(psql_q "SELECT count(*) FROM job_log_chunks WHERE job_id = $J")" = 0 ] || fail "chunks outlived their stream"
echo "1 passed, 0 failed"
