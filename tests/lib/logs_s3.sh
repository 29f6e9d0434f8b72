# tests/lib/logs_s3.sh: moto's S3 server for the itests of logs.store: s3
# (sourced after itest.sh).  logs_s3_start starts moto with an IAM user
# allowed s3:* (moto_fixture.sh: every request after its 3 unchecked ones
# must carry that key's signature), exports the key for the controller's
# credential chain (source env), creates the bucket with boto3 and sets
# LOGS_S3_YAML to the logs.s3 block.  s3py count PREFIX prints how many
# objects the bucket holds under PREFIX; s3py put KEY writes one.

logs_s3_start() {
    "$TM_SOURCE_DIR/tests/lib/moto_fixture.sh" start "$WORK/moto" 's3:*' >"$WORK/moto.env" 2>"$WORK/moto-start.log" \
        || fail "moto did not start: $(cat "$WORK/moto-start.log")"
    PIDS+=("$(cat "$WORK/moto/moto.pid")")
    MOTO_PORT=$(sed -n 's/^MOTO_PORT=//p' "$WORK/moto.env")
    AWS_ACCESS_KEY_ID=$(sed -n 's/^MOTO_ACCESS_KEY_ID=//p' "$WORK/moto.env")
    AWS_SECRET_ACCESS_KEY=$(sed -n 's/^MOTO_SECRET_ACCESS_KEY=//p' "$WORK/moto.env")
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
    unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3
    export AWS_SHARED_CREDENTIALS_FILE=/nonexistent/tarmac-test AWS_CONFIG_FILE=/nonexistent/tarmac-test
    S3URL=http://127.0.0.1:$MOTO_PORT
    BUCKET=tarmac-itest-logs
    s3py mb || fail "could not create the bucket"
    # No '/' in the prefix: moto refuses a signed listing whose prefix has one.
    LOGS_S3_YAML="  store: s3
  s3:
    bucket: $BUCKET
    endpoint: $S3URL
    region: us-east-1
    prefix: itest-
    credentials:
      source: env"
}

# boto3, signed with the same key, as the operator's own tool.
s3py() {
    python3 - "$S3URL" "$BUCKET" "$@" <<'PY'
import sys, boto3
url, bucket, cmd = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1")
if cmd == "mb":
    s3.create_bucket(Bucket=bucket)
elif cmd == "put":
    s3.put_object(Bucket=bucket, Key=sys.argv[4], Body=b"left by a crash")
elif cmd == "count":
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=sys.argv[4]):
        n += page.get("KeyCount", 0)
    print(n)
PY
}

# No S3 secret in any log of the controller or the nodes.
logs_s3_secret_absent() {
    grep -rqF -- "$AWS_SECRET_ACCESS_KEY" "$WORK"/*.log "$WORK/serve.out" "$STATE"/nodes/*/agent.log 2>/dev/null \
        && fail "the S3 secret reached a log"
    grep -q 'log store open.*logs.store=s3' "$WORK/serve.log" || fail "the s3 store never opened"
}
