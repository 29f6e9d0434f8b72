#!/bin/sh
# `tarmac local ...`, the local kind's own command, comes from its row in
# providers/registry.c (command_main): `tarmac --help` lists it after the
# binary's own commands, and it keeps every command's exit contract
# (--help 0 on stdout, bad usage 2 with the reason on stderr), all before
# any configuration or node is needed.
set -u
TARMAC=${TM_BIN:?TM_BIN names the tarmac binary}
fail() { echo "FAIL: $*"; exit 1; }

out=$("$TARMAC" --help) || fail "tarmac --help: exit $?"
printf '%s\n' "$out" | grep -q '^  local      interrupt a local provider' \
    || fail "tarmac --help does not list local: $out"
[ "$(printf '%s\n' "$out" | sed -n '/^Commands:/,/^$/p' | tail -2 | head -1 | awk '{print $1}')" = local ] \
    || fail "tarmac --help: local is not after the binary's own commands"

out=$("$TARMAC" local --help 2>/dev/null); rc=$?
[ "$rc" = 0 ] || fail "local --help: exit $rc"
case "$out" in "Usage: tarmac local interrupt NODE"*) ;; *) fail "local --help printed: $out" ;; esac

"$TARMAC" local >/dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || fail "local without a verb: exit $rc"

err=$("$TARMAC" local reboot 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] || fail "local reboot: exit $rc"
case "$err" in 'tarmac local: unknown verb "reboot"'*) ;; *) fail "local reboot said: $err" ;; esac

err=$("$TARMAC" local interrupt x 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] || fail "local interrupt x: exit $rc"
case "$err" in *'NODE: must be a positive whole number, not "x"'*) ;; *) fail "local interrupt x said: $err" ;; esac

err=$(env -u TARMAC_CONFIG "$TARMAC" local interrupt 5 --config /nonexistent/tarmac.yaml 2>&1 >/dev/null); rc=$?
[ "$rc" = 2 ] || fail "local interrupt with a missing config: exit $rc"
case "$err" in 'tarmac local: invalid configuration: '*) ;; *) fail "missing config said: $err" ;; esac
echo "tarmac local: listed by --help from the registry, --help 0, bad usage 2 with its reason"
