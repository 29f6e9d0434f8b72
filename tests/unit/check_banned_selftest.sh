#!/bin/sh
# scripts/check-banned.sh finds a banned call in code and only there: a
# fixture tree with one real call, and the same names in comments and
# string literals, must give exactly one finding and a failing exit.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/core" "$tree/controller" "$tree/providers"
cat >"$tree/core/bad.c" <<'C'
/* sprintf(buf, "x") in a comment is fine,
 * and so is strcpy(a, b) on a second line. */
static const char *s = "atoi(x) in a string";
int f(char *buf) { return sprintf(buf, "%d", 1); } // strcat(a, b)
int g(const char *v) { return my_atoi(v) + strtol(v, 0, 10); }
C
if out=$(sh "$here/scripts/check-banned.sh" "$tree"); then
    echo "FAIL: the check passed a tree with a banned call"; exit 1
fi
n=$(printf '%s\n' "$out" | grep -c 'banned call' || true)
[ "$n" = 1 ] || { echo "FAIL: want 1 finding, got $n:"; printf '%s\n' "$out"; exit 1; }
printf '%s\n' "$out" | grep -q 'core/bad.c:4:' || { echo "FAIL: wrong line: $out"; exit 1; }
rm "$tree/core/bad.c"
sh "$here/scripts/check-banned.sh" "$tree" || { echo "FAIL: a clean tree was refused"; exit 1; }
echo "PASS"
