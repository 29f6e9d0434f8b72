#!/usr/bin/env bash
# Install what tarmac needs (Debian 12 packages) and build it into build/.
#
#   scripts/setup.sh [--asan]     # --asan also builds build-asan/ with ASan+UBSan
#
# Installs only what is missing, so a second run is fast.  Needs root (or
# sudo) the first time, to install packages.
set -euo pipefail
cd "$(dirname "$0")/.."

# python3-cryptography: the GCP fake verifies our RS256 JWTs (tests/lib/gcp_fake.py).
# patroni, etcd-server: the failover under a real failover tool
# (tests/integration/ha_patroni.sh runs its own etcd and Patronis on free
# loopback ports in a temporary folder).  On a machine with systemd the
# etcd package also starts etcd.service on 127.0.0.1:2379; no test uses it
# (`systemctl disable --now etcd` if it is not wanted).
packages=(build-essential cmake pkg-config git ca-certificates
          libuv1-dev libpq-dev libcurl4-openssl-dev libssl-dev libcjson-dev libjansson-dev libh2o-dev
          libexpat1-dev libyaml-dev libcmocka-dev
          postgresql postgresql-contrib python3 python3-yaml python3-jsonschema python3-cryptography curl
          openssl chromium fonts-liberation nodejs patroni etcd-server)
# npm (openapi_lint installs the pinned @redocly/cli with it) only when
# there is none: a nodejs from another repository (NodeSource) bundles its
# own, which Debian's npm package would conflict with.
command -v npm >/dev/null 2>&1 || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# The AWS tests run the moto EC2 emulator and botocore's signer; they come
# with the machine image (Python packages, not Debian ones).  Say so early.
if ! python3 -c 'import moto, botocore' 2>/dev/null; then
    echo "setup: warning: python3 moto/botocore not found; the aws tests need them" \
         "(python3 -m pip install 'moto[server]')" >&2
fi

jobs=$(nproc 2>/dev/null || echo 2)
# Build output goes to a log; it is shown only when the build fails.
build() {
    local dir=$1; shift
    mkdir -p "$dir"
    if ! { cmake -S . -B "$dir" "$@" && cmake --build "$dir" -j "$jobs"; } >"$dir/setup.log" 2>&1; then
        tail -n 60 "$dir/setup.log" >&2
        echo "setup: build in $dir failed (full log: $dir/setup.log)" >&2
        exit 1
    fi
}
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTM_WERROR=ON
if [ "${1:-}" = "--asan" ]; then
    build build-asan -DCMAKE_BUILD_TYPE=Debug -DTM_SANITIZE=ON -DTM_WERROR=ON
fi
echo "setup: built build/tarmac"
