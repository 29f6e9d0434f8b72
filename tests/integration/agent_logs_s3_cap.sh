#!/usr/bin/env bash
# The per-job cap and the retention through logs.store: s3, against moto
# checking every signature: past logs.max_bytes_per_job the head and the
# tail are served with the marker, and the bucket holds exactly the objects
# the index rows name (the dropped chunks' are deleted); past
# logs.retention the leader removes the stream, its objects, and an object
# no row named (what a crash between the write and the index leaves).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"
. "$TM_SOURCE_DIR/tests/lib/logs_s3.sh"
logs_s3_start

e2e_start itest_agent_logs_s3_cap local "" 50 "logs:
  max_bytes_per_job: 65536
  max_chunk: 8192
$LOGS_S3_YAML"
T=$WORK/cap
mkdir -p "$T"
# 6000 numbered lines of 52 bytes: 312,000 bytes, written over about 3 s.
J=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"i=0; while [ \$i -lt 6000 ]; do i=\$((i+1)); printf 'line %06d of a job that writes past its cap......\\\\n' \$i; [ \$((i % 500)) = 0 ] && sleep 0.2; done\"}")
wait_job "$J" succeeded 90
TARMAC_TOKEN=$ADMIN "$TARMAC" logs --url "$BASE" "$J" >"$T/out" 2>"$T/err" || fail "tarmac logs: $(cat "$T/err")"
read -r next stored dropped <<<"$(psql_q "SELECT next_offset || ' ' || stored_bytes || ' ' || dropped_bytes FROM job_log_streams WHERE job_id = $J")"
[ "$next" = 312000 ] || fail "the stream received $next bytes, want 312000"
[ "$dropped" -gt 0 ] && [ "$stored" -le $((65536 + 8192)) ] || fail "stored $stored, dropped $dropped: the cap did not hold"
head -1 "$T/out" | grep -qx 'line 000001 of a job that writes past its cap......' || fail "the head is not kept: $(head -1 "$T/out")"
tail -1 "$T/out" | grep -qx 'line 006000 of a job that writes past its cap......' || fail "the tail is not kept: $(tail -1 "$T/out")"
grep -qx "\[tarmac: $dropped bytes dropped here: the output passed logs.max_bytes_per_job\]" "$T/out" \
    || fail "no marker naming $dropped dropped bytes: $(grep -a tarmac "$T/out")"
[ $(( $(stat -c %s "$T/out") - $(grep -a '^\[tarmac:' "$T/out" | wc -c) - 1 )) = "$stored" ] \
    || fail "$(stat -c %s "$T/out") bytes served for $stored stored"
# The cap's deletions reach the bucket: as many objects as index rows (they
# are deleted after the batch is answered, so give them a moment).
ROWS=$(psql_q "SELECT count(*) FROM job_log_chunks WHERE job_id = $J")
wait_for 10 "[ \"\$(s3py count itest-$J-)\" = $ROWS ]" \
    || fail "job $J: $ROWS index rows but $(s3py count "itest-$J-") objects after the cap"

# An object no row names, as a controller that died between the write and
# the index would leave it.
A=$(psql_q "SELECT attempt FROM job_log_streams WHERE job_id = $J")
s3py put "itest-$J-$A-0-00000000000000400000" || fail "could not plant the orphan"
# Retention: output last written 15 days ago goes at the leader's next
# tick, its objects and the orphan with it.
psql_q "UPDATE job_log_streams SET updated_ms = updated_ms - 15 * 86400000 WHERE job_id = $J" >/dev/null
wait_for 20 "[ \"\$(psql_q \"SELECT count(*) FROM job_log_streams WHERE job_id = $J\")\" = 0 ]" \
    || fail "the leader did not prune output past logs.retention"
[ "$(psql_q "SELECT count(*) FROM job_log_chunks WHERE job_id = $J")" = 0 ] || fail "chunks outlived their stream"
wait_for 20 "[ \"\$(s3py count itest-$J-)\" = 0 ]" \
    || fail "the retention left $(s3py count "itest-$J-") objects of job $J in the bucket"
logs_s3_secret_absent
secrets_absent
echo "1 passed, 0 failed"
