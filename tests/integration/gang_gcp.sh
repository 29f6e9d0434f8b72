#!/usr/bin/env bash
# A gang bought whole on the GCP fake (every request checked against the
# Compute v1 discovery document) through instances.bulkInsert: a job on 2
# nodes in the od pool, whose placement_group names a compact resource
# policy and whose nodes get a bootstrap each.  us-central1-a has one free
# slot, fewer than the set's minCount: its bulkInsert makes nothing and
# ends ZONE_RESOURCE_POOL_EXHAUSTED, so nothing is kept or billed, one
# decision names the set, the shortage is remembered; the next pass buys
# the whole set in us-central1-b with one bulkInsert, each member then
# tagged with its own node id, token and bootstrap (setMetadata and
# setLabels, fingerprints checked), and the gang runs there on both nodes.
# No instances.insert is sent for the gang.
set -euo pipefail
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/gcp_env.sh"

export TARMAC_SIM_AGENT=1
gcp_fake_start
DB=$(new_db itest_gang_gcp)
write_gcp_config "$WORK/c.yaml" gang 3 1s 300ms
printf '#!/bin/sh\n# node {{node_id}} of {{pool}}\nexec tarmac agent --controller {{controller_url}} --node-id {{node_id}}\n# TARMAC_ENROLL_SECRET={{enroll_secret}}\n' \
    >"$WORK/bootstrap.sh"
python3 - "$WORK/c.yaml" "$WORK/bootstrap.sh" <<'PY'
import sys
p, tmpl = sys.argv[1], sys.argv[2]
s = open(p).read()
s = s.replace("  - name: od\n    provider: gcp\n",
              "  - name: od\n    provider: gcp\n    placement_group: tarmac-compact\n"
              "    bootstrap: %s\n" % tmpl, 1)
s += "agent:\n  controller_url: http://127.0.0.1:9\n"
open(p, "w").write(s)
PY
"$TARMAC" migrate --config "$WORK/c.yaml" >/dev/null
gcp_control '{"capacity": {"us-central1-a": 1}, "resource_policies": ["tarmac-compact"]}' >/dev/null
"$TARMAC" db submit --config "$WORK/c.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/c.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/gang.out" 2>"$WORK/gang.log" || fail "serve failed"

[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'launch_failed' AND subject_kind = 'pool' AND jsonb_array_length(inputs -> 'nodes') = 2")" = 1 ] \
    || fail "want one launch_failed decision naming the set's 2 nodes: $(psql_q "SELECT kind, subject_kind, subject_id, reason FROM decisions WHERE kind LIKE 'launch%'")"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-central1-a' AND state = 'terminated' AND instance_id IS NULL AND billed_from_ms IS NULL")" = 2 ] \
    || fail "the refused set was not given up whole: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE zone = 'us-central1-b' AND billed_from_ms IS NOT NULL")" = 2 ] \
    || fail "the set was not bought in us-central1-b: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
grep -q 'msg="gcp capacity short, remembered".*zone=us-central1-a' "$WORK/gang.log" \
    || fail "no shortage remembered for us-central1-a"
grep -q 'msg="launch set refused for capacity".*nodes=2 provider=gcp .*zone=us-central1-a' "$WORK/gang.log" \
    || fail "no capacity refusal logged for the set"

# What the cloud saw: bulkInserts only, all or nothing, each member tagged
# as its node row.
psql_q "SELECT id || ' ' || launch_token || ' ' || instance_id FROM nodes WHERE zone = 'us-central1-b'" \
    >"$WORK/rows.txt"
curl -s "$GCP_BASE/__fake/state" >"$WORK/state.json"
python3 - "$WORK/state.json" "$WORK/rows.txt" <<'PY' || fail "the fake did not see the gang bought by bulkInsert"
import json, re, sys
st = json.load(open(sys.argv[1]))
rows = [l.split() for l in open(sys.argv[2]) if l.strip()]
c, calls, tagged = st["counts"], st["bulk_calls"], st["tagged"]
def need(ok, why):
    if not ok:
        sys.exit("FAIL: " + why + "\n" + json.dumps({"counts": c, "bulk_calls": calls,
                                                     "created_in": st["created_in"]}))
need(c["inserts"] == 0, "%d instances.insert sent for the gang" % c["inserts"])
need([(b["zone"], b["error"]) for b in calls] ==
     [("us-central1-a", "ZONE_RESOURCE_POOL_EXHAUSTED"), ("us-central1-b", None)],
     "want one refused bulkInsert in us-central1-a, then one in us-central1-b")
need(all(b["count"] == 2 and b["minCount"] == 2 for b in calls), "count / minCount not 2")
need(all(b["resourcePolicies"] == ["tarmac-compact"] for b in calls), "no compact placement policy")
need("us-central1-a" not in st["created_in"], "an instance was made in the short zone")
need(st["created_in"].get("us-central1-b") == 2, "not 2 instances made in us-central1-b")
need(c["set_labels"] == 2 and c["set_metadata"] == 2 and c["fingerprint_refused"] == 0,
     "want one setLabels and one setMetadata per member, none refused")
def decode(v):
    return re.sub(r"_([0-9a-f]{2})", lambda m: chr(int(m.group(1), 16)), v)
need(len(rows) == 2, "want 2 node rows in us-central1-b")
for node, token, inst in rows:
    t = tagged.get(inst)
    need(t is not None, "instance %s of node %s never tagged" % (inst, node))
    need(t["labels"].get("tarmac-node-id") == node, "node label of %s" % inst)
    need(decode(t["labels"].get("tarmac-launch-token", "")) == token, "token label of %s" % inst)
    need(t["metadata"].get("tarmac-launch-token") == token, "token metadata of %s" % inst)
    need(t["labels"].get("tarmac-launch-set") == calls[1]["labels"]["tarmac-launch-set"],
         "set label of %s" % inst)
    need(("# node %s of od" % node) in (t.get("bootstrap_head") or ""),
         "%s did not get node %s's own bootstrap" % (inst, node))
print("bulkInsert x%d (one refused whole), 0 inserts, %d setLabels, %d setMetadata, members tagged as their rows"
      % (len(calls), c["set_labels"], c["set_metadata"]))
PY
if grep -q 'tme_' "$WORK"/*.log "$WORK"/*.out; then fail "an enrollment secret in a log"; fi
sleep 1
gcp_check_cloud gang idle

# kill -9 while the set's bulkInsert is answered late (the fake made the
# instances, untagged, and holds the reply): the next process finds the
# set by its label, tags each member as its row and runs the gang; no
# second bulkInsert makes anything, nothing is an orphan.
GCP_DBS=$DB
DB=$(new_db itest_gang_gcp_kill)
GCP_DBS="$GCP_DBS $DB"
write_gcp_config "$WORK/k.yaml" gangk 3 1s 300ms
"$TARMAC" migrate --config "$WORK/k.yaml" >/dev/null
gcp_control '{"capacity": {}, "hold_ms": [0, 4000]}' >/dev/null
before=$(curl -s "$GCP_BASE/__fake/state" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(d["created_in"].values()), len(d["bulk_calls"]))')
"$TARMAC" db submit --config "$WORK/k.yaml" --team a --gpus 8 --nodes 2 --runtime 2s >/dev/null
"$TARMAC" serve --config "$WORK/k.yaml" >"$WORK/kill1.out" 2>"$WORK/kill1.log" &
PIDS+=("$!")
SERVE=$!
wait_for 20 'grep -q "msg=\"gcp launch set\"" "$WORK/kill1.log"' || fail "no bulkInsert started"
sleep 1
kill -9 "$SERVE"
wait "$SERVE" 2>/dev/null || true
if grep -q 'msg="gcp launch set made"' "$WORK/kill1.log"; then
    fail "the kill came after the set was made, not during its bulkInsert"
fi
[ "$(gcp_instances | awk '$9 == "gangk"' | wc -l)" = 2 ] \
    || fail "want the killed bulkInsert's 2 instances in the fake: $(gcp_instances)"
gcp_control '{"hold_ms": [0, 0]}' >/dev/null
timeout 60 "$TARMAC" serve --config "$WORK/k.yaml" --exit-when-idle --max-wall 40s \
    >"$WORK/kill2.out" 2>"$WORK/kill2.log" || fail "serve after the kill failed"
[ "$(psql_q "SELECT state FROM jobs")" = succeeded ] \
    || fail "gang did not succeed after the kill: $(psql_q 'SELECT id, state, state_reason FROM jobs')"
grep -q 'msg="gcp launch set found by its label, not launching again"' "$WORK/kill2.log" \
    || fail "the restarted controller did not find the set by its label"
after=$(curl -s "$GCP_BASE/__fake/state" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(d["created_in"].values()), len(d["bulk_calls"]))')
[ "$(( ${after% *} - ${before% *} ))" = 2 ] \
    || fail "want 2 instances made for the killed set, made $(( ${after% *} - ${before% *} ))"
[ "$(psql_q "SELECT count(*) FROM nodes WHERE billed_from_ms IS NOT NULL")" = 2 ] \
    || fail "want the 2 members adopted: $(psql_q 'SELECT id, zone, state, instance_id FROM nodes')"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'terminate_orphan'")" = 0 ] \
    || fail "an untagged member was taken for an orphan"
sleep 1
gcp_check_cloud gangk idle
gcp_no_violations
gcp_no_secrets
echo "gang of 2 on the GCP fake through bulkInsert: us-central1-a short of minCount, nothing kept (one decision), bought whole in us-central1-b, each member tagged as its node; killed mid-bulkInsert, the set found by its label and adopted whole"
echo "1 passed, 0 failed"
