#!/usr/bin/env bash
# A controller on an accelerated clock (time_scale 60), stopped and started
# again at once: the new one starts from the wall clock, minutes of
# controller time behind what the first wrote.  It must resume from the
# latest time stored, never behind it: no decision of the second run older
# than the first run's newest, no check constraint broken, no instance
# terminated twice.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_clock_resume)
write_config "$WORK/c.yaml" 4 2m 1m 200ms
echo "time_scale: 60" >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3m --count 2 >/dev/null

# 4 s of wall time is 4 minutes of controller time: nodes boot, jobs run
# and finish, nodes go idle.
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 4s >/dev/null 2>"$WORK/serve1.log" ||
    fail "first serve failed"
first=$(psql_q "SELECT tarmac_latest_ms()")
last_id=$(psql_q "SELECT coalesce(max(id), 0) FROM decisions")
wall=$(( $(date +%s%3N) ))
[ "$first" -gt $(( wall + 60000 )) ] || fail "the first run's clock did not run ahead of the wall clock ($first vs $wall)"

# A job queued in between makes the second run decide at once.
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --runtime 1m >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 4s >/dev/null 2>"$WORK/serve2.log" ||
    fail "second serve failed"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE id > $last_id")" -gt 0 ] || fail "the second run decided nothing"
older=$(psql_q "SELECT count(*) FROM decisions WHERE id > $last_id AND at_ms < $first")
[ "$older" = 0 ] || fail "$older decisions of the second run are older than the first run's newest time"
grep -qi 'violates check constraint' "$WORK/serve2.log" && fail "a check constraint failed after the restart"
twice=$(psql_q "SELECT count(*) FROM (SELECT subject_id FROM decisions WHERE kind = 'terminate'
                GROUP BY subject_id HAVING count(*) > 1) d")
[ "$twice" = 0 ] || fail "$twice nodes were terminated more than once"
grep -q 'clock moved up to the latest time stored' "$WORK/serve2.log" || fail "the second run did not move its clock up"
echo "clock_resume: the restarted controller resumed at or after $first"
