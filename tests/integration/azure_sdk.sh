#!/usr/bin/env bash
# The Azure fake held to the official clients (@azure/identity 4.13.1,
# @azure/arm-compute 24.1.0, pinned as ../shared/specs/reference-clients-npm.md
# says, installed with npm into a temporary folder, or the folder in
# TM_AZURE_NPM_DIR when it already holds them): the controller launches a
# spot and an on-demand VM through the fake, then tests/lib/azure_sdk_check.js
# replays our PUT bodies through the SDK (they must serialise identically)
# and drives the fake with the SDK (it must accept all of it, and refuse a
# body the real API refuses), and ClientCertificateCredential's assertion
# is verified by the fake and its header and claim names set beside ours
# (from `tarmac check azure` with the certificate).
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/azure_itest.sh"

npm_dir=${TM_AZURE_NPM_DIR:-$WORK/npm}
if [ ! -d "$npm_dir/node_modules/@azure/arm-compute" ] || [ ! -d "$npm_dir/node_modules/@azure/identity" ]; then
    mkdir -p "$npm_dir"
    timeout 300 npm install --prefix "$npm_dir" --no-audit --no-fund \
        @azure/arm-compute@24.1.0 @azure/identity@4.13.1 >"$WORK/npm.log" 2>&1 \
        || fail "npm install of the reference clients failed: $(tail -5 "$WORK/npm.log")"
fi
for p in arm-compute:24.1.0 identity:4.13.1; do
    v=$(node -p "require('$npm_dir/node_modules/@azure/${p%%:*}/package.json').version")
    [ "$v" = "${p#*:}" ] || fail "@azure/${p%%:*} is $v, not the pinned ${p#*:}"
done

DB=$(new_db itest_azure_sdk)
write_azure_config "$WORK/c.yaml" sdk 1 30s 300ms '["1"]' '["2"]'
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --runtime 30s >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team b --gpus 8 --runtime 30s --preemptible >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 3s >"$WORK/serve.out" 2>"$WORK/serve.log" \
    || fail "serve failed"
[ "$(az_vms sdk | wc -l)" = 2 ] || fail "expected 2 VMs: $(az_vms sdk)"
# Our client assertion, for the SDK check to set beside MSAL's.
sed -e '/^    credentials:$/d' -e '/^      source: env$/d' \
    -e "s|^      ca_file: .*|&\n      client_certificate: \"$AZURE_FAKE_CLIENT_CERT\"|" \
    "$WORK/c.yaml" >"$WORK/cert.yaml"
env -u AZURE_CLIENT_SECRET "$TARMAC" check azure --config "$WORK/cert.yaml" >/dev/null 2>"$WORK/check-cert.log" \
    || fail "check azure with the certificate failed"
az_ctl '{"page_size": 1, "op_delay": 0.2, "delete_delay": 0.2}'
az_curl "$AZURE_FAKE_URL/__fake/puts" >"$WORK/puts.json"
NODE_PATH="$npm_dir/node_modules" NODE_EXTRA_CA_CERTS="$AZURE_FAKE_CA" \
    timeout 60 node "$TM_SOURCE_DIR/tests/lib/azure_sdk_check.js" "$AZURE_FAKE_URL" "$AZURE_FAKE_SECRET" \
    "$WORK/puts.json" "$AZURE_FAKE_CLIENT_CERT" "$AZURE_FAKE_OTHER_CERT" >"$WORK/sdk.out" 2>"$WORK/sdk.log" || { cat "$WORK/sdk.out"; fail "SDK check failed"; }
cat "$WORK/sdk.out"
grep -q 'SDK CHECK OK' "$WORK/sdk.out" || fail "SDK check incomplete"
echo "1 passed, 0 failed"
