#!/usr/bin/env bash
# Bad input: every refusal names the field, exits 2 and writes nothing.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_bad_input)
write_config "$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null

expect_refused() {
    local field=$1; shift
    local rc=0
    "$TARMAC" db submit --config "$WORK/c.yaml" "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
    [ "$rc" = 2 ] || fail "submit $* exited $rc, expected 2: $(cat "$WORK/err")"
    grep -q -- "$field" "$WORK/err" || fail "submit $*: message does not name $field: $(cat "$WORK/err")"
}
expect_refused --gpus --team a --gpus 0
expect_refused --gpus --team a --gpus -3
expect_refused --gpus --team a --gpus two
expect_refused --gpu-milli --team a --gpu-milli 1000
expect_refused --pool --team a --gpus 1 --pool nosuchpool
expect_refused --gpu-model --team a --gpus 1 --gpu-model H100
expect_refused --estimate --team a --gpus 1 --estimate 5fortnights
expect_refused --runtime --team a --gpus 1 --runtime -5s
expect_refused --team --gpus 1
expect_refused --team --team 'bad team' --gpus 1
expect_refused --bogus --team a --gpus 1 --bogus
expect_refused --gpus --team a --gpus 9 --pool od
expect_refused --class --team a --gpus 1 --class party
[ "$(psql_q 'SELECT count(*) FROM jobs')" = 0 ] || fail "a refused submit wrote a job"

# A good one is accepted.
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 2 --estimate 10m --output json >"$WORK/ok" \
    || fail "valid submit refused"
grep -Eq '"state":[[:space:]]*"queued"' "$WORK/ok" || fail "submit output: $(cat "$WORK/ok")"

# A config with an unknown key is refused at start, naming file, line and key.
sed 's/^cluster: itest/cluster: itest\nclustre: typo/' "$WORK/c.yaml" >"$WORK/bad.yaml"
rc=0; "$TARMAC" serve --config "$WORK/bad.yaml" 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] || fail "serve with an unknown key exited $rc"
grep -q 'bad.yaml:[0-9]*: key "clustre"' "$WORK/err" || fail "config error unclear: $(cat "$WORK/err")"

# A database that is down at start: a clear message and exit 1, no hang.
rc=0
timeout 30 "$TARMAC" serve --config "$WORK/c.yaml" --database-url "postgresql://u:sekrit-pw@127.0.0.1:1/x" \
    2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] || fail "serve with the database down exited $rc"
grep -q "could not connect to the database" "$WORK/err" || fail "unclear: $(cat "$WORK/err")"
grep -q "sekrit-pw" "$WORK/err" && fail "the password leaked into the error"
echo "1 passed, 0 failed"
