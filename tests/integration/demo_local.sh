#!/usr/bin/env bash
# The README's run command, shortened (TARMAC_DEMO_SHORT=1), from a folder
# outside the checkout, against the suite's PostgreSQL: real agents run
# every job to success; the two-node job's ranks meet and each prints the
# sum and every rank's part; the spot job is interrupted, checkpoints and
# resumes from its checkpoint on another node; the fake GPUs report busy
# under a job and idle otherwise; the dashboard's address carries a token
# that is revoked at the end; the closing table has its three fleets; and
# one job's output is shown whole with `tarmac logs` where it exists, else
# its last lines from `tarmac jobs show`.
#
#   demo_local.sh          as the user ctest runs as (root: jobs run under
#                          users of their own, docs/isolation.md)
#   demo_local.sh user     as root, the demo as a plain user (nobody) from a
#                          copy of the tree that user owns: the agents run
#                          jobs as their own user; exits 77 (skipped) when
#                          not root, where the first form is that case
. "$TM_SOURCE_DIR/tests/lib/itest.sh"

AS=${1:-self}
DB=$(new_db "itest_demo_local_$AS")
OUT=$WORK/demo.out
rc=0
if [ "$AS" = user ]; then
    [ "$(id -u)" = 0 ] || { echo "not root: itest_demo_local runs the demo as a plain user"; exit 77; }
    # A tree nobody owns: the demo's scripts, config and the binary under test.
    chmod 755 "$WORK"
    mkdir -p "$WORK/home" "$WORK/clone/build"
    cp -r "$TM_SOURCE_DIR/scripts" "$TM_SOURCE_DIR/config" "$WORK/clone/"
    cp "$TARMAC" "$WORK/clone/build/tarmac"
    chown -R nobody "$WORK/home" "$WORK/clone"
    (cd / && runuser -u nobody -- env HOME="$WORK/home" TARMAC_DATABASE_URL="$DB" TARMAC_DEMO_SHORT=1 \
        TARMAC_DEMO_BIN="$WORK/clone/build/tarmac" timeout 200 bash "$WORK/clone/scripts/demo.sh") \
        >"$OUT" 2>&1 || rc=$?
else
    cd "$WORK" || exit 1
    TARMAC_DATABASE_URL=$DB TARMAC_DEMO_SHORT=1 TARMAC_DEMO_BIN=$TARMAC \
        timeout 200 bash "$TM_SOURCE_DIR/scripts/demo.sh" >"$OUT" 2>&1 || rc=$?
fi
show() { echo "--- the demo's output" >&2; cat "$OUT" >&2; }
[ "$rc" = 0 ] || { show; fail "the demo exited $rc"; }
has() { grep -qE "$1" "$OUT" || { show; fail "$2"; }; }

[ "$(psql_q "SELECT count(*) FROM jobs")" -ge 10 ] || { show; fail "the demo ran only $(psql_q "SELECT count(*) FROM jobs") jobs"; }
[ "$(psql_q "SELECT count(*) FROM jobs WHERE state <> 'succeeded'")" = 0 ] \
    || { show; psql_q "SELECT d.subject_id, d.kind, d.reason, d.inputs FROM decisions d JOIN jobs j
                       ON d.subject_kind = 'job' AND d.subject_id = j.id::text
                       WHERE j.state <> 'succeeded' ORDER BY d.id" >&2
         fail "jobs that did not succeed: $(psql_q "SELECT id, name, state, state_reason, node_id FROM jobs WHERE state <> 'succeeded'")"; }
[ "$(psql_q "SELECT count(*) FROM nodes WHERE state NOT IN ('terminated', 'interrupted')")" = 0 ] \
    || fail "nodes left: $(psql_q "SELECT id, state FROM nodes WHERE state NOT IN ('terminated', 'interrupted')")"
has 'all work done and every node released after [0-9]+ s' "the demo never saw the fleet empty"

# The ranks met through TARMAC_MASTER_ADDR/PORT: the sum and both parts.
has "allreduce: rank [01] sent \[[0-9., ]+\], received the sum \[1\.5, 3\.0, 4\.5, 6\.0\] = rank 0's \[0\.5, 1\.0, 1\.5, 2\.0\] \+ rank 1's \[1\.0, 2\.0, 3\.0, 4\.0\]" \
    "no rank printed the exchange"
RDV=$(psql_q "SELECT id FROM jobs WHERE name = 'allreduce'")
[ "$(psql_q "SELECT nodes FROM jobs WHERE id = $RDV")" = 2 ] || fail "the allreduce job is not a two-node job"

# Interrupted on its spot node, resumed from its checkpoint on another.
TRAIN=$(psql_q "SELECT id FROM jobs WHERE name = 'spot-train'")
has "interruption notice written" "the spot node was not interrupted"
has "train: attempt 2 resumed from the checkpoint at step [1-9][0-9]* " "the second attempt did not resume from a checkpoint"
has "train: attempt 2 finished all 20 steps" "the second attempt did not finish"
line=$(grep -E "^demo: the spot job $TRAIN, interrupted on node [0-9]+, resumed from its checkpoint on node [0-9]+" "$OUT") \
    || { show; fail "no line about the spot job's nodes"; }
from=$(sed -E 's/.*interrupted on node ([0-9]+),.*/\1/' <<<"$line")
to=$(sed -E 's/.* on node ([0-9]+)$/\1/' <<<"$line")
[ "$from" != "$to" ] || fail "the spot job resumed on the node it was interrupted on ($line)"
[ "$(psql_q "SELECT state FROM nodes WHERE id = $from")" = interrupted ] || fail "node $from is not interrupted"
[ "$(psql_q "SELECT count(*) FROM decisions WHERE kind = 'checkpoint' AND subject_id = '$TRAIN'")" -ge 1 ] \
    || fail "no checkpoint decision for job $TRAIN"

# The fake GPUs followed the jobs: busy (87 %) under a job, 0 % idle.
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE util_percent = 87")" -ge 1 ] || fail "no GPU sample reported busy"
[ "$(psql_q "SELECT count(*) FROM gpu_samples WHERE util_percent = 0")" -ge 1 ] || fail "no GPU sample reported idle"

# The dashboard's address with a viewer token, revoked once the run ended.
has "^demo:   http://127\.0\.0\.1:[0-9]+/#token=tmk_[0-9a-f]+$" "no dashboard address with a token"
[ "$(psql_q "SELECT count(*) FROM api_tokens WHERE name LIKE 'demo-dashboard-%' AND role = 'viewer' AND revoked")" = 1 ] \
    || fail "the dashboard's token was not revoked: $(psql_q "SELECT name, role, revoked FROM api_tokens")"

# One job's output: whole through `tarmac logs` when there is one.
if "$TARMAC" logs --help >/dev/null 2>&1; then
    has "^demo:   \(15[0-9] lines, [0-9]+ bytes\)$" "tarmac logs did not give the whole output"
else
    has "^demo:   tokenize: done, [0-9]+ documents in 150 shards$" "no output tail shown"
fi

# The closing table: the run's jobs under the two baselines and tarmac.
has "^demo: the same [0-9]+ jobs under three fleets" "no closing table"
for row in "static fleet sized for the peak +[0-9.]+ +[0-9.]+ +[0-9.]+ +-?[0-9]+%" \
           "reactive autoscaler +[0-9.]+ +[0-9.]+ +[0-9.]+ +-?[0-9]+%" \
           "tarmac \(this run, its ledger\) +[0-9.]+ +[0-9.]+ +[0-9.]+"; do
    has "^  $row" "the closing table lacks a row matching: $row"
done
echo "1 passed, 0 failed"
