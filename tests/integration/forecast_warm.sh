#!/usr/bin/env bash
# A new leader's demand forecasters start from the demand history in the
# jobs table (forecast.history, default 8 days), not empty: the log says how
# many jobs and steps it replayed.  Jobs that finished before the window are
# not read; history: 0 switches the warm start off.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_forecast_warm)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null || fail "migrate"

# 8 days of history: every 20 minutes a 2-GPU job ran for an hour (576),
# plus 5 jobs that finished 9 days ago (outside the window) and one
# queued now (so the controller has work and stays up).
now_ms=$(psql_q "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
psql_q "INSERT INTO jobs (team, name, gpus, gpu_milli, pool, state, submitted_ms, started_ms, finished_ms)
        SELECT 'a', 'hist', 2, 1000, 'od', 'succeeded', t, t + 60000, t + 3600000
          FROM (SELECT $now_ms - 8 * 86400000 + g * 1200000 AS t FROM generate_series(1, 576) g) s
         WHERE t + 3600000 < $now_ms"
in_window=$(psql_q "SELECT count(*) FROM jobs")
psql_q "INSERT INTO jobs (team, name, gpus, gpu_milli, pool, state, submitted_ms, started_ms, finished_ms)
        SELECT 'a', 'old', 1, 1000, 'od', 'succeeded', t, t, t + 60000
          FROM (SELECT $now_ms - 9 * 86400000 + g * 60000 AS t FROM generate_series(1, 5) g) s"
psql_q "INSERT INTO jobs (team, name, gpus, gpu_milli, pool, sim_runtime_ms, submitted_ms)
        VALUES ('a', 'now', 1, 1000, 'od', 600000, $now_ms)"
want_jobs=$((in_window + 1))

run_serve() { # LOG
    timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 4s >"$WORK/serve.out" 2>"$1" \
        || fail "serve failed"
}
run_serve "$WORK/serve.log"
line=$(grep 'demand forecast warmed from history' "$WORK/serve.log") || fail "no warm start logged"
echo "$line"
jobs=$(sed -n 's/.*jobs=\([0-9]*\).*/\1/p' <<<"$line")
steps=$(sed -n 's/.*steps=\([0-9]*\).*/\1/p' <<<"$line")
[ "$jobs" = "$want_jobs" ] || fail "warmed from $jobs jobs, want $want_jobs (in the window and live)"
# One-minute steps from the first job in the window (8 days less 20
# minutes ago), give or take the step the clock is in.
[ "$steps" -ge 11499 ] && [ "$steps" -le 11501 ] || fail "warmed $steps steps, want 8 days less 20 minutes of minutes"

# A database with no past (only the job queued now): nothing to warm from.
psql_q "DELETE FROM jobs WHERE name <> 'now'"
run_serve "$WORK/serve-empty.log"
grep -q 'demand forecast warmed from history.* steps=[01] ' "$WORK/serve-empty.log" \
    || fail "warmed from nothing: $(grep 'demand forecast' "$WORK/serve-empty.log")"

# Off: no history read.
sed -i 's/^tick_interval:/forecast: {history: 0}\ntick_interval:/' "$WORK/c.yaml"
run_serve "$WORK/serve-off.log"
! grep -q 'demand forecast warmed' "$WORK/serve-off.log" || fail "warmed with history: 0"
grep -q 'became leader' "$WORK/serve-off.log" || fail "the second run never led"
echo "forecast warm start: $jobs jobs, $steps steps"
