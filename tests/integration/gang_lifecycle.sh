#!/usr/bin/env bash
# A gang lives and dies whole (docs/multi-node.md), with the local provider:
#  1. a 3-node job whose rank 1 exits 3 once every rank runs: the other
#     members and a grandchild process of each are killed (rank 2 ignores
#     SIGTERM: SIGKILL after the agents' kill grace), the job fails with
#     exit 3 naming rank 1 and its node, in the database, GET /v1/jobs/ID,
#     `tarmac jobs show` and `tarmac why job`, which list every node with
#     its rank;
#  2. a 2-node job whose rank 0 exits 0 at once: rank 1 runs on to its end
#     and the job succeeds only when both have;
#  3. cancel of a running 3-node gang stops every member and its
#     grandchild.
# Every member of each job started: the start barrier let them all go.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

alive() {
    local s
    s=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}
# Every pid in the files named, dead; prints those still alive.
all_dead() {
    local f p left=
    for f in "$@"; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        alive "$p" && left="$left $p"
    done
    [ -z "$left" ] || { echo "$left"; return 1; }
}

E2E_OD_MIN=3
E2E_IDLE_GRACE=60s
e2e_start itest_gang_lifecycle
T=$WORK/gang
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
# job.sh DIR N FAIL_RANK: writes DIR/start.RANK (attempt, pid, ms) and
# DIR/pid.RANK, DIR/child.RANK (a grandchild: sleep in the background),
# waits for all N ranks to have started, then rank FAIL_RANK exits 3;
# rank 2 ignores SIGTERM; the others run until stopped.
cat >"$T/job.sh" <<'SH'
d=$1 n=$2 fail=$3 r=$TARMAC_NODE_RANK
echo "$TARMAC_ATTEMPT $$ $(date +%s%3N)" >"$d/start.$r"
echo $$ >"$d/pid.$r"
sleep 300 &
echo $! >"$d/child.$r"
i=0
while [ "$(ls "$d" | grep -c '^start\.')" -lt "$n" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
[ "$r" = "$fail" ] && { sleep 0.5; exit 3; }
[ "$r" = 2 ] && trap '' TERM
while :; do sleep 0.2; done
SH
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 3 ]" || fail "the pool's 3 nodes never came up"

# 1. rank 1 exits 3.
D=$T/fail
mkdir -p "$D" && chmod 1777 "$D"
J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":3,\"pool\":\"od\",\"command\":\"sh $T/job.sh $D 3 1\"}")
wait_job "$J" failed 60
for r in 0 1 2; do [ -f "$D/start.$r" ] || fail "rank $r never started: $(ls "$D")"; done
wait_for 15 "all_dead $D/pid.* $D/child.* >/dev/null" \
    || fail "members or grandchildren of the failed gang still run: $(all_dead "$D"/pid.* "$D"/child.*)"
R1=$(psql_q "SELECT node_id FROM job_members WHERE job_id = $J AND rank = 1")
[ -n "$R1" ] || fail "no member of rank 1: $(psql_q "SELECT * FROM job_members WHERE job_id = $J")"
[ "$(psql_q "SELECT exit_code, exit_rank, exit_node_id FROM jobs WHERE id = $J")" = "3|1|$R1" ] \
    || fail "the job should fail with 3 from rank 1 on node $R1: $(psql_q "SELECT state, exit_code, exit_signal, exit_rank, exit_node_id, state_reason FROM jobs WHERE id = $J")"
psql_q "SELECT state_reason FROM jobs WHERE id = $J" | grep -q "rank 1 (node $R1)" \
    || fail "the reason does not name the rank: $(psql_q "SELECT state_reason FROM jobs WHERE id = $J")"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'job_failed' AND subject_id = '$J' AND (inputs ->> 'rank')::int = 1")" = 1 ] \
    || fail "no job_failed decision naming rank 1"
api GET "/v1/jobs/$J" >"$WORK/job.json"
python3 - "$WORK/job.json" "$R1" <<'PY' || fail "GET /v1/jobs/$J: $(cat "$WORK/job.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["exit_code"] == 3 and j["exit_rank"] == 1 and j["exit_node_id"] == int(sys.argv[2]), j
m = j["members"]
assert [x["rank"] for x in m] == [0, 1, 2], m
assert [x["node_id"] for x in m] == sorted(x["node_id"] for x in m), m
assert m[1]["node_id"] == int(sys.argv[2]) and m[1]["exit_code"] == 3, m
assert all(x["address"] == "127.0.0.1" and x["started_ms"] for x in m), m
PY
TARMAC_TOKEN=$ADMIN "$TARMAC" jobs show "$J" --url "$BASE" >"$WORK/show.out" 2>&1 || fail "jobs show: $(cat "$WORK/show.out")"
grep -q "rank 1  node $R1" "$WORK/show.out" && grep -q "rank 0  node" "$WORK/show.out" && grep -q "rank 2  node" "$WORK/show.out" \
    && grep -q "failed by rank 1 (node $R1): exit 3" "$WORK/show.out" || fail "jobs show: $(cat "$WORK/show.out")"
TARMAC_TOKEN=$ADMIN "$TARMAC" why job "$J" --url "$BASE" >"$WORK/why.out" 2>&1 || fail "why: $(cat "$WORK/why.out")"
grep -q "rank 2  node" "$WORK/why.out" && grep -q "failed by rank 1" "$WORK/why.out" || fail "why job: $(cat "$WORK/why.out")"

# 2. rank 0 is done first: the gang runs on to rank 1's end.
D=$T/early
mkdir -p "$D" && chmod 1777 "$D"
cat >"$T/early.sh" <<SH
[ "\$TARMAC_NODE_RANK" = 0 ] && exit 0
sleep 3
echo done >"$D/done"
SH
J2=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":2,\"pool\":\"od\",\"command\":\"sh $T/early.sh\"}")
wait_job "$J2" 'succeeded|failed|cancelled' 60
[ "$(psql_q "SELECT state FROM jobs WHERE id = $J2")" = succeeded ] && [ -f "$D/done" ] \
    || fail "rank 1 should run to its end after rank 0 exited 0: $(psql_q "SELECT state, exit_code, exit_signal, state_reason FROM jobs WHERE id = $J2"); $(ls "$D")"
[ "$(psql_q "SELECT count(*) FROM job_members WHERE job_id = $J2 AND exit_code = 0")" = 2 ] \
    || fail "both members should have exited 0: $(psql_q "SELECT * FROM job_members WHERE job_id = $J2")"

# 3. cancel stops every member, grandchildren too.
D=$T/cancel
mkdir -p "$D" && chmod 1777 "$D"
J3=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":3,\"pool\":\"od\",\"command\":\"sh $T/job.sh $D 3 none\"}")
wait_for 60 "[ \"\$(ls $D | grep -c '^child\.')\" = 3 ]" || fail "the gang's members never all started: $(ls "$D")"
all_dead "$D"/pid.* >/dev/null && fail "the members died before the cancel"
api POST "/v1/jobs/$J3/cancel" '{}' >/dev/null
wait_job "$J3" cancelled 10
wait_for 15 "all_dead $D/pid.* $D/child.* >/dev/null" \
    || fail "members or grandchildren of the cancelled gang still run: $(all_dead "$D"/pid.* "$D"/child.*)"
secrets_absent
echo "1 passed, 0 failed"
