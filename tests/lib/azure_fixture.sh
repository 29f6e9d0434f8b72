#!/usr/bin/env bash
# azure_fixture.sh start DIR: a throwaway CA-less self-signed certificate for
# 127.0.0.1 (openssl), and the Azure fake (azure_fake.py) serving HTTPS with
# it.  Prints, for the caller to source:
#   AZURE_FAKE_PORT=N AZURE_FAKE_URL=https://127.0.0.1:N AZURE_FAKE_CA=DIR/cert.pem
#   AZURE_FAKE_PID=P  AZURE_FAKE_SECRET=... (the client secret the fake accepts)
#   AZURE_FAKE_CLIENT_CERT=DIR/client.pem (key + certificate, registered on the app)
#   AZURE_FAKE_OTHER_CERT=DIR/other.pem   (key + certificate the app does not know)
# The caller kills AZURE_FAKE_PID when done.
set -euo pipefail
cmd=${1:?start}; dir=${2:?dir}
[ "$cmd" = start ] || { echo "usage: azure_fixture.sh start DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=127.0.0.1" \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$dir/key.pem" -out "$dir/cert.pem" \
    >/dev/null 2>&1
# The app's client certificate (key and certificate in one PEM file, as
# az cli and ClientCertificateCredential take it), registered with the
# fake; and another that is not, for the refusal (AADSTS700027).
for c in client other; do
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=tarmac-test-$c" \
        -keyout "$dir/$c-key.pem" -out "$dir/$c-cert.pem" >/dev/null 2>&1
    cat "$dir/$c-key.pem" "$dir/$c-cert.pem" >"$dir/$c.pem"
    rm -f "$dir/$c-key.pem"
done
secret="s3cr3t-$(openssl rand -hex 12)"
AZURE_FAKE_SECRET=$secret python3 "$here/azure_fake.py" --cert "$dir/cert.pem" \
    --client-cert "$dir/client-cert.pem" \
    --key "$dir/key.pem" --spec "${TM_AZURE_SPEC:-$here/../../../shared/specs/azure-compute/compute-2024-07-01.autoscaler-extract.json}" \
    >"$dir/fake.out" 2>"$dir/fake.err" </dev/null &
pid=$!
for _ in $(seq 1 100); do
    grep -q AZURE_FAKE_READY "$dir/fake.out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { cat "$dir/fake.err" >&2; exit 1; }
    sleep 0.1
done
grep -q AZURE_FAKE_READY "$dir/fake.out" || { echo "azure fake did not start" >&2; exit 1; }
port=$(sed -n 's/^AZURE_FAKE_PORT=//p' "$dir/fake.out")
echo "AZURE_FAKE_PORT=$port"
echo "AZURE_FAKE_URL=https://127.0.0.1:$port"
echo "AZURE_FAKE_CA=$dir/cert.pem"
echo "AZURE_FAKE_PID=$pid"
echo "AZURE_FAKE_SECRET=$secret"
echo "AZURE_FAKE_CLIENT_CERT=$dir/client.pem"
echo "AZURE_FAKE_OTHER_CERT=$dir/other.pem"
