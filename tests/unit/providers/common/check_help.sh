#!/bin/sh
# `tarmac check <cloud> --help` prints the usage on stdout and exits 0, as
# every command's --help does; an option the check does not know exits 2
# with the usage on stderr (providers/common/check.c, the one runner).
set -u
TARMAC=${TM_BIN:?TM_BIN names the tarmac binary}
for c in aws gcp azure; do
    out=$("$TARMAC" check "$c" --help 2>/dev/null)
    rc=$?
    [ "$rc" = 0 ] || { echo "FAIL: check $c --help: exit $rc"; exit 1; }
    case "$out" in
    "usage: tarmac check $c"*) ;;
    *) echo "FAIL: check $c --help printed: $out"; exit 1 ;;
    esac
    "$TARMAC" check "$c" --no-such-option >/dev/null 2>&1
    rc=$?
    [ "$rc" = 2 ] || { echo "FAIL: check $c --no-such-option: exit $rc"; exit 1; }
done
echo "check aws|gcp|azure --help: exit 0 with the usage on stdout; an unknown option: exit 2"
