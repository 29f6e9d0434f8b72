#!/bin/sh
# tests/lib/moto_fixture.sh: one moto (EC2 or S3) emulator with SigV4 checking on.
#
#   moto_fixture.sh start DIR [ACTION]
#                               start moto on a free loopback port, create an
#                               IAM user with a policy allowing ACTION (default
#                               ec2:*; s3:* for the S3 log store) and an access
#                               key (moto's 3 unchecked requests), then print
#                                 MOTO_PORT=...
#                                 MOTO_ACCESS_KEY_ID=...
#                                 MOTO_SECRET_ACCESS_KEY=...
#                               and the marker line MOTO_READY.  Every later
#                               request must be correctly signed with that key.
#   moto_fixture.sh stop DIR    stop it (pid in DIR/moto.pid).
#
# The secret is printed only for the test that started moto; it is a
# throwaway key of a throwaway emulator.
set -eu
cmd=${1:?usage: moto_fixture.sh start|stop DIR}
dir=${2:?usage: moto_fixture.sh start|stop DIR}
action=${3:-ec2:*}
mkdir -p "$dir"

case "$cmd" in
start)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
    # Instance types are validated so that an unknown type is refused as on AWS.
    INITIAL_NO_AUTH_ACTION_COUNT=3 MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION=true \
        python3 -m moto.server -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/moto.pid"
    i=0
    until curl -s -o /dev/null "http://127.0.0.1:$port/moto-api/"; do
        i=$((i + 1))
        if [ $i -gt 150 ]; then
            echo "moto did not start; see $dir/moto.log" >&2
            kill "$(cat "$dir/moto.pid")" 2>/dev/null || true
            exit 1
        fi
        sleep 0.1
    done
    python3 - "http://127.0.0.1:$port" "$action" <<'PY'
import json, sys
import boto3
ep, action = sys.argv[1], sys.argv[2]
iam = boto3.client("iam", region_name="us-east-1", endpoint_url=ep,
                   aws_access_key_id="AKIAIOSFODNN7EXAMPLE", aws_secret_access_key="x")
iam.create_user(UserName="tarmac")
iam.put_user_policy(UserName="tarmac", PolicyName="allow", PolicyDocument=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]}))
key = iam.create_access_key(UserName="tarmac")["AccessKey"]
print("MOTO_ACCESS_KEY_ID=" + key["AccessKeyId"])
print("MOTO_SECRET_ACCESS_KEY=" + key["SecretAccessKey"])
PY
    echo "MOTO_PORT=$port"
    echo "MOTO_READY"
    ;;
stop)
    if [ -f "$dir/moto.pid" ]; then
        kill "$(cat "$dir/moto.pid")" 2>/dev/null || true
        rm -f "$dir/moto.pid"
    fi
    ;;
*)
    echo "usage: moto_fixture.sh start|stop DIR" >&2
    exit 2
    ;;
esac
