#!/usr/bin/env bash
# `tarmac check config` (controller/cli/check_config.c) on
# config/example-three-clouds.yaml: valid, one queue (group a100) whose spot
# offers run azure 2.99 < aws 5.09 < gcp 15.42 and on-demand aws first; a
# group mixing GPU models is refused with exit 2, naming pools[1].group.
# Needs no database.
set -euo pipefail
TARMAC=${TM_BIN:?run through ctest}
WORK=$(mktemp -d /tmp/tarmac-checkcfg.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TARMAC" check config --config "$TM_SOURCE_DIR/config/example-three-clouds.yaml" >"$WORK/out" 2>"$WORK/err" \
    || fail "the example was refused: $(cat "$WORK/err")"
grep -q '^configuration valid: 3 providers, 6 pools' "$WORK/out" || fail "summary: $(cat "$WORK/out")"
grep -q '^queue group a100 (A100, 8 GPUs per node):' "$WORK/out" || fail "queue: $(cat "$WORK/out")"
order=$(awk '$1 == "spot" {print $2}' "$WORK/out" | tr '\n' ' ')
[ "$order" = "azure aws gcp " ] || fail "spot offers in the order: $order"
first_od=$(awk '$1 == "on_demand" {print $2; exit}' "$WORK/out")
[ "$first_od" = aws ] || fail "cheapest on-demand: $first_od"

sed 's/gpu_model: A100$/gpu_model: A100-80GB/' "$TM_SOURCE_DIR/config/example-three-clouds.yaml" |
    awk 'BEGIN{n=0} /gpu_model: A100-80GB/{n++; if (n != 2) sub(/A100-80GB/, "A100")} {print}' >"$WORK/bad.yaml"
rc=0
"$TARMAC" check config --config "$WORK/bad.yaml" >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] || fail "a group mixing GPU models: exit $rc, expected 2"
grep -q 'pools\[1\].group' "$WORK/err" && grep -q 'mixes GPU models' "$WORK/err" \
    || fail "the error does not name the field: $(cat "$WORK/err")"
echo "check config: example valid, spot order $order; mixed group refused: $(cat "$WORK/err")"
