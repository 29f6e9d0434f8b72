#!/usr/bin/env bash
# `tarmac replay --quotas FILE` (controller/cli/replay_quota.c) on a tiny
# Philly-format trace, two nodes of 8 GPUs, teams a and b of 8 GPUs each:
# team b's two jobs of 8 GPUs wait for each other under strict-quota (mean
# completion 150 s) and run together under tarmac, on a's idle quota (100
# s), so b's sharing ratio is 100/150; every policy's object carries the
# keys other tools read; a bad quotas file is refused with exit 2 and an
# error naming the entry and the field.  Needs no database.
set -euo pipefail
TARMAC=${TM_BIN:?run through ctest}
WORK=$(mktemp -d /tmp/tarmac-replayq.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$WORK/philly.csv" <<'CSV'
timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,100.0,8,800.0,b
2017-10-09 07:00:00,100.0,8,800.0,b
2017-10-09 09:00:00,100.0,8,800.0,a
CSV
cat >"$WORK/q.yaml" <<'YAML'
- team: a
  gpus: 8
- team: b
  gpus: 8
  borrowing_limit: 8
YAML
"$TARMAC" replay --pods "$WORK/philly.csv" --gpus 16 --estimates exact --quotas "$WORK/q.yaml" \
    --policy tarmac --json >"$WORK/out.json" 2>"$WORK/err" || fail "replay: $(cat "$WORK/err")"
python3 - "$WORK/out.json" <<'PY' || fail "results: $(cat "$WORK/out.json")"
import json, sys
res = {r["policy"]: r for r in json.load(open(sys.argv[1]))["results"]}
assert set(res) == {"strict-quota", "tarmac"}, res.keys()
for r in res.values():
    for k in ("policy", "utilisation", "wait_mean_s", "jct_mean_s", "starved", "gpu_hours",
              "redone_gpu_hours", "guarantee_met", "teams"):
        assert k in r, k
    for t in r["teams"]:
        for k in ("team", "jobs", "jct_mean_s", "sharing_ratio", "guarantee_met"):
            assert k in t, k
team = {p: {t["team"]: t for t in r["teams"]} for p, r in res.items()}
assert abs(team["strict-quota"]["b"]["jct_mean_s"] - 150) < 1e-6, team
assert abs(team["tarmac"]["b"]["jct_mean_s"] - 100) < 1e-6, team
assert abs(team["tarmac"]["b"]["sharing_ratio"] - 100 / 150) < 1e-9, team
assert abs(team["strict-quota"]["b"]["sharing_ratio"] - 1) < 1e-9, team
assert res["tarmac"]["redone_gpu_hours"] == 0
PY

bad() { # file contents, the text the error must hold
    printf '%s\n' "$1" >"$WORK/bad.yaml"
    rc=0
    "$TARMAC" replay --pods "$WORK/philly.csv" --gpus 16 --quotas "$WORK/bad.yaml" >"$WORK/out" 2>"$WORK/err" || rc=$?
    [ "$rc" = 2 ] || fail "$2: exit $rc, expected 2"
    grep -qF "$2" "$WORK/err" || fail "the error does not name $2: $(cat "$WORK/err")"
}
bad $'- team: a\n  gpus: 8\n- team: b' 'quotas[1].gpus: required'
bad $'- team: a\n  gpus: 1.5' 'quotas[0].gpus'
bad $'- team: a\n  gpus: -2' 'quotas[0].gpus'
bad $'- team: a\n  gpus: lots' 'quotas[0].gpus: "lots" is not a number'
bad $'- team: a\n  gpus: 8\n  colour: red' 'quotas[0].colour: unknown field'
bad $'- gpus: 8' 'quotas[0].team: required'
bad $'- team: a\n  gpus: 8\n  borrowing_limit: -1' 'quotas[0].borrowing_limit'
bad $'team: a' 'quotas: must be a list'
echo "replay --quotas: sharing ratio 100/150 for b; bad files refused naming the field"
