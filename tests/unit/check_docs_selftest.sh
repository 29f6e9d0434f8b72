#!/bin/sh
# scripts/check-docs.sh fails when a README names a file that is not there,
# or when the README's first fenced block is not the two commands .ci/run
# relies on, and passes once the tree agrees with its docs.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/core" "$tree/docs" "$tree/.ci" "$tree/scripts"
touch "$tree/scripts/demo.sh" "$tree/scripts/test.sh"
printf '# t\n\n```\nbash scripts/demo.sh\nbash scripts/test.sh\n```\n' >"$tree/README.md"
printf '#!/bin/sh\nbash scripts/test.sh\n' >"$tree/.ci/run"
printf '# core/\n\nOwns clock.c and the `<uv.h>` glue, as curl'"'"'s lib/multi.c does.\n' >"$tree/core/README.md"
printf '# page\n\nSee core/clock.c.\n' >"$tree/docs/page.md"

expect_fail() {
    if out=$(sh "$here/scripts/check-docs.sh" "$tree"); then
        echo "FAIL: passed although $1"; exit 1
    fi
    printf '%s\n' "$out" | grep -q "$2" || { echo "FAIL: $1, but said: $out"; exit 1; }
}
expect_fail "core/README.md names a missing clock.c" 'core/README.md: names clock.c'
touch "$tree/core/clock.c"
sh "$here/scripts/check-docs.sh" "$tree" >/dev/null || { echo "FAIL: a tree that agrees was refused"; exit 1; }
printf '#!/bin/sh\nbash scripts/test.sh --quick\n' >"$tree/.ci/run"
expect_fail ".ci/run changed the test command" '.ci/run does not call'
echo PASS
