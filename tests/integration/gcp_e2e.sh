#!/usr/bin/env bash
# The controller end to end against the loopback Compute Engine fake
# (tests/lib/gcp_fake.py: every request checked against the discovery
# document, bearer tokens issued and checked, JWTs verified with the key's
# public half):
#  1. `tarmac check gcp` exit codes (0 ok, 3 authentication, 1 other);
#  2. jobs on an on-demand and a spot pool: instances with the right
#     machine type, provisioning model, termination action and labels for
#     every node row; jobs run (sim agent), instances deleted after grace;
#  3. no private key, access token or JWT in any log line, decision or error;
#     no request the real API would refuse (fake violations: none).
# Faults (exhaustion, preemption, 429/5xx/401) are in gcp_faults.sh, the
# kill -9 rounds in gcp_kill9.sh.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"

export TARMAC_SIM_AGENT=1
gcp_fake_start

# ---- 1. tarmac check gcp -------------------------------------------------
rc=0
"$TARMAC" check gcp --key-file "$GCP_KEY" --endpoint "$GCP_ENDPOINT" --token-url "$GCP_TOKEN_URL" \
    --zones us-central1-a,us-central1-b --machine-types a2-highgpu-8g \
    >"$WORK/check.out" 2>"$WORK/check.log" || rc=$?
[ "$rc" = 0 ] || fail "check gcp: exit $rc"
grep -q 'a2-highgpu-8g gpus=8 model=A100' "$WORK/check.out" || fail "check gcp output: $(cat "$WORK/check.out")"
python3 "$TM_SOURCE_DIR/tests/lib/gcp_fake.py" make-key "$WORK/other-key.json" "$GCP_EMAIL" tarmac-test
rc=0
"$TARMAC" check gcp --key-file "$WORK/other-key.json" --endpoint "$GCP_ENDPOINT" \
    --token-url "$GCP_TOKEN_URL" >/dev/null 2>"$WORK/check-auth.log" || rc=$?
[ "$rc" = 3 ] || fail "check gcp with a key the endpoint does not know: exit $rc"
grep -q 'authentication failed' "$WORK/check-auth.log" || fail "check gcp did not say why"
rc=0
"$TARMAC" check gcp --project tarmac-test --endpoint "$GCP_ENDPOINT" --metadata-url http://127.0.0.1:1 \
    >/dev/null 2>"$WORK/check-nocred.log" || rc=$?
[ "$rc" = 3 ] || fail "check gcp without a key or a metadata server: exit $rc"
grep -q 'no credentials' "$WORK/check-nocred.log" || fail "check gcp did not say there are no credentials"
rc=0
"$TARMAC" check gcp --key-file "$GCP_KEY" --endpoint "$GCP_ENDPOINT" --token-url "$GCP_TOKEN_URL" \
    --machine-types a9-bogus >/dev/null 2>>"$WORK/check.log" || rc=$?
[ "$rc" = 1 ] || fail "check gcp with an unknown machine type: exit $rc"
echo "check gcp: exit codes 0/3/1 as documented"

# ---- bad key file and missing project: refused at start, naming the field --
DB=$(new_db itest_gcp_e2e 2>/dev/null)
head -c 200 "$GCP_KEY" >"$WORK/truncated.json"
write_gcp_config "$WORK/bad.yaml" e2e 3 2s 300ms "$WORK/truncated.json"
"$TARMAC" migrate --config "$WORK/bad.yaml" >/dev/null 2>&1
rc=0
timeout 20 "$TARMAC" serve --config "$WORK/bad.yaml" --max-wall 3s >/dev/null 2>"$WORK/bad-key.log" || rc=$?
[ "$rc" != 0 ] || fail "serve started with a truncated key file"
grep -q 'providers\[0\].credentials.file' "$WORK/bad-key.log" || fail "truncated key: field not named: $(tail -3 "$WORK/bad-key.log")"
sed '/^    project:/d' "$WORK/bad.yaml" >"$WORK/noproj.yaml"
rc=0
"$TARMAC" migrate --config "$WORK/noproj.yaml" >/dev/null 2>"$WORK/no-project.log" || rc=$?
[ "$rc" != 0 ] || fail "a gcp provider without a project was accepted"
grep -q 'providers\[0\].project' "$WORK/no-project.log" || fail "missing project not named: $(cat "$WORK/no-project.log")"
echo "bad input: a truncated key file and a missing project are refused, naming the field"

# ---- 2. end to end -------------------------------------------------------
write_gcp_config "$WORK/c.yaml" e2e 3 2s 200ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null 2>&1
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 3s --count 2 >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --runtime 2s --count 2 --preemptible >/dev/null
submitted=$(psql_q 'SELECT count(*) FROM jobs')
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 5s \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"
gcp_instances >"$WORK/e2e-instances.txt"
cat "$WORK/e2e-instances.txt"
[ "$(psql_q 'SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL')" -ge 2 ] \
    || fail "no instances launched: $(psql_q 'SELECT id, state FROM nodes')"
while IFS='|' read -r id pool capacity token iid; do
    line=$(awk -v id="$iid" '$1 == id' "$WORK/e2e-instances.txt")
    [ -n "$line" ] || fail "node $id: instance $iid not in the fake"
    set -- $line
    [ "$2" = a2-highgpu-8g ] || fail "node $id: machine type $2"
    want=STANDARD; [ "$capacity" = spot ] && want=SPOT
    [ "$3" = "$want" ] || fail "node $id ($capacity): provisioningModel $3"
    if [ "$capacity" = spot ]; then [ "$4" = DELETE ] || fail "node $id: instanceTerminationAction $4"; fi
    [ "$6" = "$token" ] || fail "node $id: token $6, row $token"
    [ "$7" = "$pool" ] || fail "node $id: pool label $7, row $pool"
    [ "$8" = "$id" ] || fail "node $id: node label $8"
done < <(psql_q "SELECT id, pool, capacity_type, launch_token, instance_id FROM nodes WHERE instance_id IS NOT NULL AND state NOT IN ('terminating', 'terminated', 'interrupted')")
[ "$(psql_q "SELECT count(*) FROM nodes WHERE pool = 'spot' AND capacity_type = 'spot'")" -ge 1 ] \
    || fail "no spot node for the preemptible work"
gcp_check_cloud e2e
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 50s \
    >>"$WORK/serve.out" 2>>"$WORK/serve.log" || fail "serve failed"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "jobs not all succeeded: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] \
    || fail "nodes left: $(psql_q 'SELECT id, state FROM nodes')"
gcp_check_cloud e2e idle
echo "end to end: $submitted jobs succeeded on $(psql_q 'SELECT count(*) FROM nodes') gcp nodes, all deleted after grace"

# ---- 3. secrets and validation --------------------------------------------
gcp_no_secrets
gcp_no_violations
echo "1 passed, 0 failed"
