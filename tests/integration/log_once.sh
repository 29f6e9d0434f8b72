#!/usr/bin/env bash
# A standing state is said once: jobs held by a team's hard cap and a pool
# at its maximum, on an accelerated clock (time_scale 60) over many ticks.
# The log has one line per held job, not one per job per tick; the
# launch_refused decision is written when the refusal starts, not every
# tick, and its inputs count the launches that put the pool at its max.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

DB=$(new_db itest_log_once)
write_config "$WORK/c.yaml" 2 10m 1m 200ms
echo "time_scale: 60" >>"$WORK/c.yaml"
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
psql_q "INSERT INTO budgets (scope_kind, scope, cap_cents, hard, updated_ms) VALUES ('team', 'poor', 0, true, 0)"
"$TARMAC" db submit --config "$WORK/c.yaml" --team poor --gpus 1 --runtime 30m --count 6 >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team rich --gpus 8 --runtime 30m --count 4 >/dev/null
# 6 s at 200 ms a tick: about 30 passes.
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --max-wall 6s >/dev/null 2>"$WORK/serve.log" ||
    fail "serve failed"
passes=$(grep -c 'msg="decision" op=request_node' "$WORK/serve.log" || true)
[ "$passes" -ge 1 ] || fail "no node was requested"
budget_lines=$(grep -c 'msg="decision" op=budget' "$WORK/serve.log" || true)
[ "$budget_lines" -ge 1 ] || fail "no budget refusal was logged"
[ "$budget_lines" -le 6 ] || fail "$budget_lines budget lines for 6 held jobs: logged every tick"
refused_lines=$(grep -c 'msg="decision" op=launch_refused' "$WORK/serve.log" || true)
[ "$refused_lines" -ge 1 ] || fail "the pool at its max was never logged"
[ "$refused_lines" -le 2 ] || fail "$refused_lines launch_refused lines: logged every tick"
rows=$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_refused'")
[ "$rows" -ge 1 ] && [ "$rows" -le 2 ] || fail "$rows launch_refused decisions over about 30 passes"
# "at its max of N" with its inputs: live nodes and this pass's launches.
psql_q "SELECT reason, inputs FROM decisions WHERE kind = 'launch_refused' ORDER BY id LIMIT 1" >"$WORK/refusal"
python3 - "$WORK/refusal" <<'PY' || fail "the refusal's text and inputs disagree: $(cat "$WORK/refusal")"
import json, re, sys
reason, inputs = open(sys.argv[1]).read().strip().split("|", 1)
inp = json.loads(inputs)
m = re.search(r"at its max of (\d+)", reason)
assert m, reason
assert int(m.group(1)) == inp["max_nodes"], (m.group(1), inp)
assert inp["live_nodes"] + inp.get("launching", 0) >= inp["max_nodes"], inp
PY
echo "log_once: $budget_lines budget lines, $refused_lines launch_refused lines, $rows decisions"
