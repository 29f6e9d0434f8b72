#!/usr/bin/env bash
# tarmac migrate: empty database, already migrated, two at once, and a
# database newer than the binary.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

# As many files as migrations/ holds: each new one must not break this test.
NMIG=$(find "$TM_SOURCE_DIR/migrations" -name '[0-9][0-9][0-9][0-9]_*.sql' | wc -l)
DB=$(new_db itest_migrate)
out=$("$TARMAC" migrate --database-url "$DB" --output json)
echo "$out" | grep -q "\"applied\": $NMIG" || fail "first migrate should apply $NMIG files: $out"
[ "$(psql_q 'SELECT count(*) FROM schema_migrations')" = "$NMIG" ] || fail "schema_migrations rows"
[ "$(psql_q "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('jobs','nodes','pools','decisions','spend','budgets','api_tokens','gpu_samples','prices','job_allocations')")" = 10 ] \
    || fail "tables missing"

out=$("$TARMAC" migrate --database-url "$DB" --output json)
echo "$out" | grep -q '"applied": 0' || fail "second migrate must be a no-op: $out"

# Constraints the database enforces.
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, submitted_ms) VALUES ('t', 0, 1000, 0)" 2>/dev/null \
    && fail "a job with 0 whole GPUs and a whole-GPU share was accepted"
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, state, submitted_ms) VALUES ('t', 1, 1000, 'bogus', 0)" 2>/dev/null \
    && fail "an unknown job state was accepted"

# Two migrators at once on a fresh database: both succeed, files applied once.
DB=$(new_db itest_migrate_race)
"$TARMAC" migrate --database-url "$DB" --output json >"$WORK/a.out" 2>"$WORK/a.log" &
a=$!
"$TARMAC" migrate --database-url "$DB" --output json >"$WORK/b.out" 2>"$WORK/b.log" &
b=$!
wait $a || fail "migrator a failed"
wait $b || fail "migrator b failed"
na=$(sed -n 's/.*"applied": \([0-9]*\).*/\1/p' "$WORK/a.out")
nb=$(sed -n 's/.*"applied": \([0-9]*\).*/\1/p' "$WORK/b.out")
total=$(( na + nb ))
[ "$total" = "$NMIG" ] || fail "two migrators applied $total files in all, expected $NMIG"

# A database newer than we know is refused, by migrate and by serve.
psql_q "INSERT INTO schema_migrations (version, name, sha256) VALUES (999, '0999_future.sql', 'x')"
if "$TARMAC" migrate --database-url "$DB" 2>"$WORK/new.err"; then fail "migrate accepted a newer schema"; fi
grep -q "newer than this tarmac knows" "$WORK/new.err" || fail "unclear message: $(cat "$WORK/new.err")"
write_config "$WORK/c.yaml"
if "$TARMAC" serve --config "$WORK/c.yaml" 2>"$WORK/serve.err"; then fail "serve accepted a newer schema"; fi
grep -q "newer than this tarmac knows" "$WORK/serve.err" || fail "serve: $(cat "$WORK/serve.err")"
echo "1 passed, 0 failed"
