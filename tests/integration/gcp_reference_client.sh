#!/usr/bin/env bash
# The GCP fake and our JWT checked against Google's own client library,
# google-auth-library (pinned as ../shared/specs/reference-clients-npm.md
# says, installed into a temporary folder, nothing kept):
#  1. for a fresh key and several (iat, scope, aud), tarmac's RS256 JWT
#     (tests/gcp_jwt_tool) equals google-auth-library's getJwsSign() byte
#     for byte;
#  2. JWT.authorize() against the fake's token endpoint (the hard-coded
#     token URL redirected with a gaxios interceptor, as the real client
#     would post it) is accepted, and the token it gets works for
#     zones.get, instances.aggregatedList and instances.insert sent through
#     the client's own request(); a wrong key is refused by the fake;
#  3. the fake recorded no violation (it refuses nothing the client sends).
# Without npm or the registry: SKIPPED, exit 0.
set -euo pipefail
WORK=$(mktemp -d /tmp/tarmac-gcpref.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    [ -n "${TM_KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$WORK"/*.err >&2 2>/dev/null || true; exit 1; }
GAL_VERSION=10.9.1
TOOL=${TM_BINARY_DIR:?run through ctest}/tests/gcp_jwt_tool
[ -x "$TOOL" ] || fail "no $TOOL"
if ! command -v npm >/dev/null || ! command -v node >/dev/null; then
    echo "SKIPPED: node/npm not installed"; exit 0
fi
if ! timeout 150 npm install --prefix "$WORK/npm" --no-audit --no-fund \
        "google-auth-library@$GAL_VERSION" >"$WORK/npm.log" 2>&1; then
    echo "SKIPPED: could not install google-auth-library@$GAL_VERSION: $(tail -2 "$WORK/npm.log")"; exit 0
fi

FAKE="$TM_SOURCE_DIR/tests/lib/gcp_fake.py"
EMAIL=ref@tarmac-test.iam.gserviceaccount.com
python3 "$FAKE" make-key "$WORK/key.json" "$EMAIL" tarmac-test
python3 "$FAKE" make-key "$WORK/wrong.json" "$EMAIL" tarmac-test

# ---- 1. byte-for-byte JWT ---------------------------------------------------
cat >"$WORK/sign.js" <<'JS'
const path = require('path');
const [prefix, keyFile, iat, scope, aud] = process.argv.slice(2);
const key = require(path.resolve(keyFile));
Date.prototype.getTime = function () { return Number(iat) * 1000; };
const m = require(path.join(prefix, 'node_modules/google-auth-library/build/src/gtoken/jwsSign.js'));
// The library always signs for the real token URL; a custom aud goes in
// additionalClaims, which overrides it exactly as tarmac's token_audience does.
const extra = aud === 'https://oauth2.googleapis.com/token' ? undefined : { aud };
process.stdout.write(m.getJwsSign({ iss: key.client_email, scope, key: key.private_key,
                                     additionalClaims: extra }));
JS
n=0
for iat in 1764633600 1800000000 1700000001; do
    for scope in https://www.googleapis.com/auth/compute https://www.googleapis.com/auth/cloud-platform; do
        for aud in https://oauth2.googleapis.com/token http://127.0.0.1:9/token; do
            ref=$(node "$WORK/sign.js" "$WORK/npm" "$WORK/key.json" "$iat" "$scope" "$aud")
            ours=$("$TOOL" "$WORK/key.json" "$iat" "$scope" "$aud")
            [ "$ref" = "$ours" ] || fail "JWT differs for iat=$iat scope=$scope aud=$aud:
 google-auth-library: $ref
 tarmac:              $ours"
            n=$((n + 1))
        done
    done
done
echo "JWT: tarmac's equals google-auth-library $GAL_VERSION's byte for byte ($n claim sets)"

# ---- 2. the official client against the fake ------------------------------
python3 "$FAKE" --key "$WORK/key.json" >"$WORK/fake.out" 2>"$WORK/fake.err" &
PIDS+=("$!")
for _ in $(seq 100); do grep -q GCP_FAKE_READY "$WORK/fake.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(sed -n 's/^GCP_FAKE_PORT=//p' "$WORK/fake.out")
[ -n "$PORT" ] || fail "fake did not start"
cat >"$WORK/client.js" <<'JS'
const path = require('path');
const [prefix, keyFile, port] = process.argv.slice(2);
const { JWT } = require(path.join(prefix, 'node_modules/google-auth-library'));
const { Gaxios } = require(path.join(prefix, 'node_modules/gaxios'));
const key = require(path.resolve(keyFile));
const base = `http://127.0.0.1:${port}`;
const gx = new Gaxios();
gx.interceptors.request.add({ resolved: async c => {
  if (String(c.url).startsWith('https://oauth2.googleapis.com/token')) c.url = `${base}/token`;
  return c; } });
(async () => {
  const client = new JWT({ email: key.client_email, key: key.private_key,
                           scopes: ['https://www.googleapis.com/auth/compute'], transporter: gx });
  const creds = await client.authorize();
  if (!creds.access_token) throw new Error('no token');
  const api = `${base}/compute/v1/projects/tarmac-test`;
  const z = await client.request({ url: `${api}/zones/us-central1-a` });
  if (z.data.status !== 'UP') throw new Error('zones.get');
  const body = { name: 'ref-1', machineType: 'zones/us-central1-a/machineTypes/g2-standard-4',
    labels: { 'tarmac-cluster': 'ref' },
    disks: [{ boot: true, autoDelete: true, initializeParams: { sourceImage: 'projects/debian-cloud/global/images/family/debian-12' } }],
    networkInterfaces: [{ network: 'global/networks/default' }],
    scheduling: { provisioningModel: 'SPOT', instanceTerminationAction: 'DELETE', automaticRestart: false, onHostMaintenance: 'TERMINATE' } };
  const op = await client.request({ url: `${api}/zones/us-central1-a/instances`, method: 'POST',
    params: { requestId: '6f1c4d2a-8b3e-4f5a-9c7d-0e1f2a3b4c5d' }, data: body });
  const done = await client.request({ url: `${api}/zones/us-central1-a/operations/${op.data.name}/wait`, method: 'POST' });
  if (done.data.status !== 'DONE' || done.data.error) throw new Error('insert op: ' + JSON.stringify(done.data));
  const l = await client.request({ url: `${api}/aggregated/instances`,
    params: { filter: 'labels.tarmac-cluster = "ref"', maxResults: 1 } });
  const n = Object.values(l.data.items).reduce((a, s) => a + (s.instances || []).length, 0);
  if (n !== 1) throw new Error('aggregatedList found ' + n);
  if (process.argv[5] === 'bad') {
    // What the real API refuses must be refused (and recorded) by the fake.
    const bad = [
      { url: `${api}/zones/us-central1-a/instances`, method: 'POST',
        data: { ...body, name: 'ref-2', scheduling: { provisioningModel: 'CHEAP' } } },
      { url: `${api}/zones/us-central1-a/instances`, method: 'POST', data: { ...body, name: 'ref-3', gpuCount: 8 } },
      { url: `${api}/aggregated/instances`, params: { bogus: '1' } },
      { url: `${api}/zones/us-central1-a/instances`, method: 'POST', data: { ...body, name: 'Ref_4' } },
      { url: `${api}/zones/us-central1-a/instances`, method: 'POST', params: { requestId: 'not-a-uuid' }, data: { ...body, name: 'ref-5' } },
    ];
    for (const b of bad) {
      let status = 0;
      try { await client.request(b); } catch (e) { status = e.status || (e.response && e.response.status); }
      if (status !== 400) throw new Error('the fake accepted a bad request: ' + JSON.stringify(b.data || b.params));
    }
  }
  console.log('ok');
})().catch(e => { console.error("client failed:", e.stack, e.response && JSON.stringify(e.response.data)); process.exit(1); });
JS
node "$WORK/client.js" "$WORK/npm" "$WORK/key.json" "$PORT" >"$WORK/client.out" 2>"$WORK/client.err" \
    || fail "google-auth-library against the fake: $(cat "$WORK/client.err")"
echo "google-auth-library: authorize(), zones.get, instances.insert + zoneOperations.wait, aggregatedList accepted by the fake"
rc=0
node "$WORK/client.js" "$WORK/npm" "$WORK/wrong.json" "$PORT" >/dev/null 2>"$WORK/wrong.err" || rc=$?
[ "$rc" != 0 ] || fail "the fake accepted a JWT signed with a key it does not know"
# (gaxios 7's error redactor trips over the redirected request; the fake's
# own log says why it refused.)
grep -q 'token refused: invalid JWT signature' "$WORK/fake.err" || fail "wrong key: $(cat "$WORK/wrong.err")"
echo "a JWT signed with another key is refused"

# ---- 3. nothing the client sent was refused; what the API refuses is -------
v=$(curl -s "http://127.0.0.1:$PORT/__fake/state" | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)["violations"]))')
[ -z "$v" ] || fail "the fake refused what google-auth-library sent: $v"
node "$WORK/client.js" "$WORK/npm" "$WORK/key.json" "$PORT" bad >"$WORK/bad.out" 2>"$WORK/bad.err" \
    || fail "bad requests: $(cat "$WORK/bad.err")"
n=$(curl -s "http://127.0.0.1:$PORT/__fake/state" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["violations"]))')
[ "$n" = 5 ] || fail "expected 5 recorded violations, got $n"
echo "the fake refuses and records a bad enum, an unknown body key, an unknown query parameter, a bad name and a bad requestId"
echo "1 passed, 0 failed"
