#!/usr/bin/env bash
# docs/openapi.yaml passes `redocly lint` (@redocly/cli, pinned below) with
# the rules in redocly.yaml: no error and no warning.  The CLI is installed
# from the npm registry into a cache folder under the build directory the
# first time, and reused after that.  No registry, no npm: the test fails
# saying so, it does not pass untested.
set -euo pipefail

VERSION=1.34.5
SRC=${TM_SOURCE_DIR:?run through ctest}
CACHE=${TM_BINARY_DIR:?run through ctest}/redocly-cli-$VERSION
BIN=$CACHE/node_modules/.bin/redocly

fail() { echo "FAIL: $*" >&2; exit 1; }

command -v node >/dev/null || fail "node is not installed (scripts/setup.sh installs nodejs)"
if [ ! -x "$BIN" ] || [ "$("$BIN" --version 2>/dev/null)" != "$VERSION" ]; then
    command -v npm >/dev/null || fail "npm is not installed (scripts/setup.sh installs it)"
    # Into a side folder first, so an interrupted install is never taken
    # for a finished one.
    rm -rf "$CACHE.partial"
    mkdir -p "$CACHE.partial"
    echo "installing @redocly/cli@$VERSION into $CACHE"
    if ! timeout 240 npm install --no-audit --no-fund --fetch-retries=1 --prefix "$CACHE.partial" \
            "@redocly/cli@$VERSION" >"$CACHE.partial/npm.log" 2>&1; then
        tail -n 20 "$CACHE.partial/npm.log" >&2
        fail "could not install @redocly/cli@$VERSION from the npm registry" \
             "(is the registry reachable? npm config get registry: $(npm config get registry 2>/dev/null))"
    fi
    rm -rf "$CACHE"
    mv "$CACHE.partial" "$CACHE"
fi
[ "$("$BIN" --version)" = "$VERSION" ] || fail "$BIN is not version $VERSION"

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
# Exit status 1 means problems were found; the totals say which.
"$BIN" lint --config "$SRC/redocly.yaml" --format=stylish "$SRC/docs/openapi.yaml" || true
"$BIN" lint --config "$SRC/redocly.yaml" --format=json "$SRC/docs/openapi.yaml" >"$OUT" 2>/dev/null || true
python3 - "$OUT" <<'PY' || exit 1
import json, sys
try:
    t = json.load(open(sys.argv[1]))["totals"]
except (ValueError, KeyError) as e:
    sys.exit(f"FAIL: redocly lint gave no totals ({e})")
print(f"openapi_lint: {t['errors']} error(s), {t['warnings']} warning(s)")
if t["errors"] or t["warnings"]:
    sys.exit("FAIL: docs/openapi.yaml has lint problems (listed above)")
PY
