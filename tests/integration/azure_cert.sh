#!/usr/bin/env bash
# The certificate credential end to end against the Azure fake, with no
# client secret in the environment at all:
#  1. `tarmac check azure` with azure.client_certificate: exit 0 with the
#     registered certificate; 3 with one the app does not know (the fake
#     answers invalid_client AADSTS700027, as the service does); 1 naming
#     the key for a file without a certificate, and for a certificate
#     beside a secret source;
#  2. the fake itself refuses an assertion that names the registered
#     certificate but is signed by another key (AADSTS700027);
#  3. jobs for an on-demand and a spot pool run on VMs launched with tokens
#     the assertion bought; the VMs are released;
#  4. no request the real API would refuse (every assertion verified:
#     signature, x5t, aud, iss/sub, exp, a fresh jti), and no line of the
#     private key, no token, in any log line or decision.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"
unset AZURE_CLIENT_SECRET

# write_cert_config FILE CLUSTER PEM [write_azure_config's other arguments]
write_cert_config() {
    local file=$1 cluster=$2 pem=$3
    shift 3
    write_azure_config "$file.secret" "$cluster" "$@"
    sed -e '/^    credentials:$/d' -e '/^      source: env$/d' \
        -e "s|^      ca_file: .*|&\n      client_certificate: \"$pem\"|" "$file.secret" >"$file"
    grep -q 'client_certificate' "$file" || fail "config rewrite failed"
    ! grep -q 'source: env' "$file" || fail "config rewrite kept the secret source"
}

# ---- 1. tarmac check azure -----------------------------------------------
DB=postgresql://unused@127.0.0.1:1/unused
write_cert_config "$WORK/check.yaml" check "$AZURE_FAKE_CLIENT_CERT"
rc=0
"$TARMAC" check azure --config "$WORK/check.yaml" >"$WORK/check.out" 2>"$WORK/check.log" || rc=$?
[ "$rc" = 0 ] || fail "check azure with the certificate: exit $rc"
grep -q 'client certificate /CN=tarmac-test-client, x5t ' "$WORK/check.log" \
    || fail "check azure did not name the certificate: $(cat "$WORK/check.log")"
grep -q 'via=client_certificate' "$WORK/check.log" || fail "token not obtained by certificate"
write_cert_config "$WORK/other.yaml" check "$AZURE_FAKE_OTHER_CERT"
rc=0
"$TARMAC" check azure --config "$WORK/other.yaml" >/dev/null 2>"$WORK/check-other.log" || rc=$?
[ "$rc" = 3 ] || fail "check azure with an unregistered certificate: exit $rc"
grep -q 'authentication failed (invalid_client): AADSTS700027' "$WORK/check-other.log" \
    || fail "check azure did not say why: $(cat "$WORK/check-other.log")"
write_cert_config "$WORK/nocert.yaml" check "$AZURE_FAKE_CA"
rc=0
"$TARMAC" check azure --config "$WORK/nocert.yaml" >/dev/null 2>"$WORK/check-nocert.log" || rc=$?
[ "$rc" = 1 ] || fail "check azure with a file holding no key: exit $rc"
grep -q 'key "providers\[0\].azure.client_certificate": .*no private key' "$WORK/check-nocert.log" \
    || fail "refusal does not name the key: $(cat "$WORK/check-nocert.log")"
sed -e "s|^      ca_file: .*|&\n      client_certificate: \"$AZURE_FAKE_CLIENT_CERT\"|" \
    "$WORK/check.yaml.secret" >"$WORK/both.yaml"
rc=0
AZURE_CLIENT_SECRET=$AZURE_FAKE_SECRET "$TARMAC" check azure --config "$WORK/both.yaml" \
    >/dev/null 2>"$WORK/check-both.log" || rc=$?
[ "$rc" = 1 ] || fail "check azure with a secret and a certificate: exit $rc"
grep -q 'exactly one credential' "$WORK/check-both.log" || fail "$(cat "$WORK/check-both.log")"
echo "check azure with a certificate: exit codes 0/3/1 as documented"

# ---- 2. the fake refuses a signature by another key ----------------------
python3 - "$AZURE_FAKE_URL" "$AZURE_FAKE_CA" "$AZURE_FAKE_CLIENT_CERT" "$AZURE_FAKE_OTHER_CERT" <<'PY' \
    || fail "the fake accepted a forged assertion"
import base64, json, ssl, sys, time, urllib.error, urllib.parse, urllib.request, uuid
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding
url, ca, registered, other = sys.argv[1:]
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
cert = x509.load_pem_x509_certificate(open(registered, "rb").read())
key = serialization.load_pem_private_key(open(other, "rb").read(), None)
aud = f"{url}/tenant-1/oauth2/v2.0/token"
now = int(time.time())
h = b64(json.dumps({"alg": "RS256", "typ": "JWT", "x5t": b64(cert.fingerprint(hashes.SHA1()))}).encode())
c = b64(json.dumps({"aud": aud, "exp": now + 600, "iss": "client-1", "sub": "client-1",
                    "nbf": now, "jti": str(uuid.uuid4())}).encode())
sig = b64(key.sign(f"{h}.{c}".encode(), padding.PKCS1v15(), hashes.SHA256()))
form = urllib.parse.urlencode({"client_id": "client-1", "scope": "https://management.azure.com/.default",
    "grant_type": "client_credentials",
    "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    "client_assertion": f"{h}.{c}.{sig}"}).encode()
req = urllib.request.Request(aud, data=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
try:
    urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca))
    sys.exit(1)
except urllib.error.HTTPError as e:
    body = json.load(e)
    ok = e.code == 401 and body["error"] == "invalid_client" and body["error_codes"] == [700027]
    print("forged assertion:", e.code, body["error"], body["error_description"][:60])
    sys.exit(0 if ok else 1)
PY

# ---- 3. end to end -------------------------------------------------------
DB=$(new_db itest_azure_cert)
write_cert_config "$WORK/c.yaml" cert "$AZURE_FAKE_CLIENT_CERT" 2 2s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 4s >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --runtime 4s --preemptible >/dev/null
submitted=$(psql_q 'SELECT count(*) FROM jobs')
timeout 90 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 60s \
    >"$WORK/serve.out" 2>"$WORK/serve.log" || fail "serve failed"
grep -q 'msg="azure provider ready".* auth=client_certificate' "$WORK/serve.log" \
    || fail "provider not on the certificate"
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")" = "$submitted" ] \
    || fail "jobs not all succeeded: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q 'SELECT count(*) FROM nodes WHERE instance_id IS NOT NULL')" -ge 2 ] \
    || fail "no VMs launched: $(psql_q 'SELECT id, state FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state <> 'terminated'")" = 0 ] \
    || fail "nodes left: $(psql_q 'SELECT id, state FROM nodes')"
sleep 1
check_azure cert idle
accepted=$(az_curl "$AZURE_FAKE_URL/__fake/assertions" | python3 -c '
import json, sys
print(sum(1 for a in json.load(sys.stdin) if a["accepted"]))')
[ "$accepted" -ge 2 ] || fail "the fake accepted $accepted assertions"
echo "end to end: $submitted jobs succeeded on $(psql_q 'SELECT count(*) FROM nodes') azure nodes; $accepted assertions accepted"

# ---- 4. requests and secrets ---------------------------------------------
check_violations
check_no_secrets
# Every base64 line of the private key (the file's own PKCS#8 block, which
# is what tarmac re-encodes): in no log, output or decision.
sed -n '/BEGIN PRIVATE KEY/,/END PRIVATE KEY/p' "$AZURE_FAKE_CLIENT_CERT" | grep -v -- '-----' \
    >"$WORK/keylines.txt"
[ "$(wc -l <"$WORK/keylines.txt")" -ge 20 ] || fail "could not read the key's lines"
if grep -rqFf "$WORK/keylines.txt" "$WORK"/*.log "$WORK"/*.out "$WORK/decisions.txt"; then
    fail "private key material in $(grep -rlFf "$WORK/keylines.txt" "$WORK"/*.log "$WORK"/*.out "$WORK/decisions.txt")"
fi
echo "no line of the private key ($(wc -l <"$WORK/keylines.txt") lines) in any log, output or decision"
echo "1 passed, 0 failed"
