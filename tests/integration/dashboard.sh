#!/usr/bin/env bash
# The dashboard at /, in headless Chromium (Debian's chromium package),
# against the real binary: `tarmac serve` with the sim cloud runs jobs of
# three teams under budgets, Chromium loads /#token=<viewer token>, and
# tests/lib/dashboard_check.py compares every figure of the rendered page
# with what the API answers just before and just after.  Also: the page,
# its script and its style sheet come from the server with a Content
# Security Policy and name no other host; a refused token brings the token
# form; a screenshot is taken (TM_KEEP_WORK=1 keeps it in $WORK).
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || fail "chromium is not installed: run scripts/setup.sh (it installs Debian's chromium)"

DB=$(new_db itest_dashboard)
# At most 2 nodes a pool and a long idle grace: the fleet settles (two
# nodes up, three jobs running, one waiting for room) and holds still.
write_config "$WORK/c.yaml" 2 600s 1s 300ms
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
ADMIN=$("$TARMAC" token create --name dash-admin --role admin --config "$WORK/c.yaml" 2>"$WORK/token.log") \
    || fail "token create admin"
VIEWER=$("$TARMAC" token create --name dash-viewer --role viewer --config "$WORK/c.yaml" 2>>"$WORK/token.log") \
    || fail "token create viewer"
ENGINEER=$("$TARMAC" token create --name dash-eng --role engineer --team nlp --config "$WORK/c.yaml" 2>>"$WORK/token.log") \
    || fail "token create engineer"

# History with known figures for /v1/timeseries, two hours back (T0 on a
# minute): gone nodes and finished jobs, which the controller only reads as
# history (accrual_done: the ledger has nothing left to charge for them).
T0=$(psql_q "SELECT (floor(extract(epoch FROM now()) / 60) * 60000)::bigint - 7200000")
m() { echo $(( T0 + $1 )); }   # T0 + ms
psql_q "INSERT INTO nodes (id, pool, launch_token, zone, instance_type, gpus, gpu_model, cpu_milli,
          memory_mib, capacity_type, state, price_uusd_per_hour, requested_ms, billed_from_ms, ready_ms,
          terminated_ms, accrual_done)
        VALUES (9001, 'od', 'hist-a', 'sim-1a', 'sim.8x', 8, 'A100', 96000, 1000000, 'on_demand',
                'terminated', 32770000, $(m 0), $(m 0), $(m 0), $(m 1800000), true),
               (9002, 'od', 'hist-b', 'sim-1a', 'sim.8x', 4, 'A100', 96000, 1000000, 'on_demand',
                'interrupted', 32770000, $(m 630000), $(m 630000), $(m 630000), $(m 1200000), true)" >/dev/null
psql_q "INSERT INTO jobs (team, gpus, gpu_milli, state, node_id, submitted_ms, started_ms, finished_ms)
        VALUES ('hist', 8, 1000, 'succeeded', 9001, $(m 0), $(m 300000), $(m 1500000)),
               ('hist', 0, 500, 'succeeded', 9001, $(m 120000), $(m 720000), $(m 915000)),
               ('hist', 1, 1000, 'cancelled', NULL, $(m 2400000), NULL, $(m 2700000))" >/dev/null
psql_q "INSERT INTO gpu_samples (node_id, gpu_index, at_ms, util_percent, memory_used_mib)
        VALUES (9001, 0, $(m 61000), 50, 1), (9001, 1, $(m 62000), 70, 1)" >/dev/null

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TARMAC_LISTEN=127.0.0.1:$PORT "$TARMAC" serve --config "$WORK/c.yaml" >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVE=$!
PIDS+=("$SERVE")
BASE=http://127.0.0.1:$PORT
wait_for 20 "curl -fsS $BASE/readyz >/dev/null 2>&1" || fail "the API never became ready"

# The assets: right types, the policy, nothing from elsewhere.
for a in /:text/html /dashboard.js:text/javascript /dashboard.css:text/css; do
    path=${a%%:*} type=${a#*:}
    curl -fsS -D "$WORK/headers" -o "$WORK/asset" "$BASE$path" || fail "GET $path"
    grep -qi "^content-type: $type; charset=utf-8" "$WORK/headers" || fail "GET $path: $(grep -i content-type "$WORK/headers")"
    grep -qi "^content-security-policy: default-src 'self';" "$WORK/headers" || fail "GET $path: no Content-Security-Policy"
    if grep -Eio 'https?://[^"'"'"' )]*' "$WORK/asset"; then fail "GET $path names another host (above)"; fi
    [ -s "$WORK/asset" ] || fail "GET $path is empty"
done
curl -fsS -o "$WORK/page.html" "$BASE/" || fail "GET /"
grep -q '<script src="/dashboard.js"' "$WORK/page.html" || fail "the page does not load its script from this server"

api() { curl -fsS -H "Authorization: Bearer $1" "$BASE$2"; }

# /v1/timeseries over that history: each step's average, worked out by hand
# from the rows above (the live fleet only starts two hours later).
api "$VIEWER" "/v1/timeseries?since_ms=$T0&step_s=60" >"$WORK/history.json" || fail "timeseries"
python3 - "$WORK/history.json" "$T0" <<'PY' || fail "/v1/timeseries does not match the history"
import json, sys
doc, t0 = json.load(open(sys.argv[1])), int(sys.argv[2])
pts = doc["points"]
assert doc["since_ms"] == t0 and doc["step_s"] == 60, (doc["since_ms"], doc["step_s"])
assert len(pts) >= 120 and pts[0]["start_ms"] == t0 and pts[1]["start_ms"] == t0 + 60000
bad = []
for k in range(60):
    prov = (8 if k < 30 else 0) + (2 if k == 10 else 4 if 11 <= k <= 19 else 0)
    alloc = (8 if 5 <= k <= 24 else 0) + (0.5 if 12 <= k <= 14 else 0.125 if k == 15 else 0)
    run = (1 if 5 <= k <= 24 else 0) + (1 if 12 <= k <= 14 else 0.25 if k == 15 else 0)
    queue = (k <= 4) + (2 <= k <= 11) + (40 <= k <= 44)
    want = {"gpus_provisioned": prov, "gpus_allocated": alloc, "gpus_idle": max(prov - alloc, 0),
            "queued_jobs": queue, "running_jobs": run, "util_percent": 60 if k == 1 else None}
    got = {key: pts[k][key] for key in want}
    if any((got[x] is None) != (want[x] is None) or (want[x] is not None and abs(got[x] - want[x]) > 1e-9)
           for x in want):
        bad.append(f"step {k}: got {got}, expected {want}")
print("\n".join(bad[:10]) or "timeseries: 60 steps of history as expected")
sys.exit(1 if bad else 0)
PY
# Bad windows: 400 naming the field, as every other route.
for q in step_s=0:step_s step_s=abc:step_s step_s=86401:step_s "since_ms=-5:since_ms" \
         "since_ms=99999999999999:since_ms" "since_ms=1&step_s=60:step_s" "step_s=60&step_s=60:step_s" \
         "window=1h:window"; do
    code=$(curl -sS -o "$WORK/err.json" -w '%{http_code}' -H "Authorization: Bearer $VIEWER" \
        "$BASE/v1/timeseries?${q%:*}")
    [ "$code" = 400 ] || fail "timeseries?${q%:*}: $code, expected 400"
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(d["field"] != sys.argv[2])' \
        "$WORK/err.json" "${q##*:}" || fail "timeseries?${q%:*}: $code '$(cat "$WORK/err.json")', expected field ${q##*:}"
done
submit() {
    local code
    code=$(curl -sS -o "$WORK/job.json" -w '%{http_code}' -X POST "$BASE/v1/jobs" \
        -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$1")
    [ "$code" = 201 ] || fail "submit $1: $code $(cat "$WORK/job.json")"
}
budget() {
    local code
    code=$(curl -sS -o "$WORK/budget.json" -w '%{http_code}' -X PUT "$BASE/v1/budgets/$1" \
        -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' -d "$2")
    [ "$code" = 200 ] || fail "budget $1: $code $(cat "$WORK/budget.json")"
}
# Two hours each: nothing finishes while the test looks.  8 + 4 + 2 GPUs on
# two 8-GPU nodes leaves 2 idle and the second 8-GPU job waiting.
submit '{"team":"nlp","gpus":8,"class":"train","runtime_estimate_s":7200}'
submit '{"team":"vision","gpus":4,"class":"eval","runtime_estimate_s":7200}'
submit '{"team":"search","gpus":2,"class":"inference","runtime_estimate_s":7200}'
submit '{"team":"nlp","gpus":8,"class":"train","runtime_estimate_s":7200}'
budget nlp '{"cap_cents":5000000,"period":"month","hard":true,"warn_percent":80}'
budget vision '{"cap_cents":1,"period":"month","hard":false,"warn_percent":50}'
budget acme '{"cap_cents":100000000,"period":"month","hard":false,"warn_percent":90,"scope_kind":"org"}'
wait_for 60 '[ "$(psql_q "SELECT count(*) FROM jobs WHERE state = '"'running'"'")" = 3 ]' \
    || fail "three jobs never ran: $(psql_q "SELECT id, team, state, state_reason FROM jobs")"
# Spend on the ledger, so the bars have something to show.
wait_for 30 '[ "$(psql_q "SELECT count(DISTINCT team) FROM spend WHERE kind = '"'job'"'")" = 3 ]' \
    || fail "no spend for the three teams: $(psql_q "SELECT team, kind, sum(cents) FROM spend GROUP BY 1, 2")"

# read_api DIR TOKEN: what the page reads, with the page's token; running
# jobs (to count them) and /metrics fleet-wide.
read_api() {
    mkdir -p "$1"
    api "$2" "/v1/timeseries?step_s=15" >"$1/timeseries.json" || fail "timeseries"
    api "$2" /v1/spend >"$1/spend.json" || fail "spend"
    api "$2" /v1/budgets >"$1/budgets.json" || fail "budgets"
    api "$2" "/v1/decisions?limit=15" >"$1/decisions.json" || fail "decisions"
    api "$2" "/v1/pools?limit=100" >"$1/pools.json" || fail "pools"
    api "$VIEWER" "/v1/jobs?state=running&limit=1000" >"$1/running.json" || fail "running jobs"
    curl -fsS "$BASE/metrics" >"$1/metrics.txt" || fail "metrics"
    python3 "$TM_SOURCE_DIR/tests/lib/prom_parse.py" "$1/metrics.txt" >"$1/metrics.json" || fail "metrics parse"
}
chrome() {
    # Its own profile, nothing fetched but the page: no sync, no updates.
    "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
        --user-data-dir="$WORK/chrome" --no-first-run --disable-extensions \
        --disable-background-networking --disable-component-update --disable-sync \
        --virtual-time-budget=8000 "$@"
}

# check_page NAME TOKEN: the page against the API read before and after
# it; a fleet that moved in between (a tick placed or finished something)
# makes the check say 3: look again.
check_page() {
    local name=$1 token=$2 rc=3 attempt
    for attempt in 1 2 3; do
        read_api "$WORK/$name-before" "$token"
        chrome --enable-logging=stderr --log-level=0 --dump-dom "$BASE/#token=$token&window=15m" \
            >"$WORK/$name.html" 2>"$WORK/$name-console.log" || fail "chromium --dump-dom ($name)"
        read_api "$WORK/$name-after" "$token"
        rc=0
        python3 "$TM_SOURCE_DIR/tests/lib/dashboard_check.py" --dom "$WORK/$name.html" \
            --before "$WORK/$name-before" --after "$WORK/$name-after" || rc=$?
        [ "$rc" = 3 ] || break
    done
    [ "$rc" = 0 ] || { head -c 3000 "$WORK/$name.html" >&2; fail "the dashboard ($name) does not show what the API says (rc $rc)"; }
    grep -q "$token" "$WORK/$name.html" && fail "the token is left in the page ($name)"
    # The page's console: no script error, no request the policy refused,
    # no failed read (the page itself logs nothing).
    if grep ':CONSOLE' "$WORK/$name-console.log"; then fail "the page ($name) wrote to its console (above)"; fi
}
check_page viewer "$VIEWER"
# An engineer sees its team's spend and budget only, and no fleet-wide
# idle spend or projection (the API gives null): the page says so, and
# shows the rest.
check_page engineer "$ENGINEER"
grep -q 'id="spend-idle" class="value" data-value="" title="not shown to an engineer token' "$WORK/engineer.html" \
    || fail "the engineer's page does not explain the missing idle spend"

# A refused token: the form, no data.
chrome --dump-dom "$BASE/#token=tm_not_a_real_token" >"$WORK/dom-bad.html" 2>>"$WORK/chromium.log" || fail "chromium --dump-dom (bad token)"
grep -q '<body data-state="login"' "$WORK/dom-bad.html" || fail "a refused token does not bring the token form"
grep -q 'id="gpus-idle" class="value" data-value' "$WORK/dom-bad.html" && fail "figures shown for a refused token"

# The screenshot: a PNG of the window's size with more than a blank page in it.
chrome --screenshot="$WORK/dashboard.png" --window-size=1280,900 --hide-scrollbars \
    "$BASE/#token=$VIEWER&window=15m" >/dev/null 2>>"$WORK/chromium.log" || fail "chromium --screenshot"
python3 - "$WORK/dashboard.png" <<'PY' || fail "the screenshot is not a non-trivial 1280x900 PNG"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1280, 900), (w, h)
# A blank page compresses to almost nothing; charts, text and tables do not.
assert len(data) > 30000, len(data)
print(f"screenshot {w}x{h}, {len(data)} bytes")
PY

grep -q -e "$VIEWER" -e "$ADMIN" -e "$ENGINEER" "$WORK/serve.log" "$WORK/serve.out" && fail "a token was logged"
# A clean stop after all of it (under the sanitizers: no leak either).
kill -TERM "$SERVE"
wait "$SERVE" || fail "serve exited $? after SIGTERM"
echo "1 passed, 0 failed"
