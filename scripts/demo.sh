#!/usr/bin/env bash
# Set tarmac up and show it doing real work, in about two minutes.
#
#   scripts/demo.sh            the local provider: real agents, real jobs
#   scripts/demo.sh --sim      the simulated cloud, a bigger fleet (demo_sim.sh)
#
# Installs what is missing, builds, creates a local PostgreSQL cluster
# (scripts/demo_db.sh; unless TARMAC_DATABASE_URL is set), migrates, and
# runs `tarmac serve` on the local provider (config/demo-local.yaml): each
# node is a `tarmac agent` process on this machine with two fake A100s
# whose utilisation follows the jobs, and the jobs are the small shell and
# Python programs of scripts/demo-jobs/, queued through the API in waves
# over the run.  Along the way: a two-node job whose ranks meet through
# TARMAC_MASTER_ADDR/PORT and print what they exchanged, a checkpointing
# job on a spot node that is interrupted and resumes from its checkpoint on
# another node, one job's whole output (`tarmac logs`), the dashboard's
# address with a token that lives as long as the run; then what tarmac
# spent beside a static fleet and a reactive autoscaler on the same jobs.
#
# TARMAC_DEMO_SHORT=1 shortens every job and wave (about 40 s; the tests
# use it); TARMAC_DEMO_BIN names a built tarmac and skips the setup;
# TARMAC_DEMO_KEEP=1 keeps the run's folder (the controller's log, the
# nodes' folders) and says where.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = "--sim" ]; then
    exec bash "$here/demo_sim.sh"
fi
[ $# -eq 0 ] || { echo "usage: scripts/demo.sh [--sim]" >&2; exit 2; }
cd "$here/.."
root=$(pwd)

if [ -n "${TARMAC_DEMO_BIN:-}" ]; then
    tarmac=$TARMAC_DEMO_BIN
else
    bash scripts/setup.sh
    tarmac=$root/build/tarmac
fi
short=${TARMAC_DEMO_SHORT:-}
# Job lengths and wave times, in seconds: the full run, then the short one.
if [ -n "$short" ]; then
    t_tok=6 t_eval=4 t_rdv=4 t_infer=4 train_steps=20 wave2=6 wave3=12 grace=4s
else
    t_tok=20 t_eval=12 t_rdv=15 t_infer=15 train_steps=60 wave2=20 wave3=50 grace=10s
fi

# The run's folder: the nodes' folders, the shared checkpoint storage and
# the jobs' programs.  Jobs run under users of their own when this runs as
# root (docs/isolation.md): they pass through it (0711) and read the
# programs (0755), which is why the programs are copied out of the
# checkout, a folder they may not enter.
work=$(mktemp -d /tmp/tarmac-demo.XXXXXX)
chmod 711 "$work"
mkdir -m 755 "$work/jobs"
cp scripts/demo-jobs/*.sh scripts/demo-jobs/*.py "$work/jobs/"
chmod 755 "$work/jobs/"*

# Every process of the run's nodes goes with it: they carry the provider's
# marker in their environment (providers/local/README.md).
kill_nodes() {
    python3 - "TM_LOCAL_NODE_DIR=$work/nodes/" <<'PY' || true
import os, signal, sys
mark = sys.argv[1].encode()
for pid in os.listdir("/proc"):
    if not pid.isdigit():
        continue
    try:
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
        if any(e.startswith(mark) for e in env):
            os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
PY
}
cleanup() {
    set +e # everything here is tried, whatever went before
    [ -n "${serve_pid:-}" ] && kill "$serve_pid" 2>/dev/null
    [ -n "${tail_pid:-}" ] && kill "$tail_pid" 2>/dev/null
    wait 2>/dev/null
    kill_nodes
    if [ -n "${TARMAC_DEMO_KEEP:-}" ]; then echo "demo: kept $work" >&2; else rm -rf "$work"; fi
    eval "${stop_pg:-true}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

if [ -z "${TARMAC_DATABASE_URL:-}" ]; then
    # The demo's own cluster lives outside the checkout (scripts/demo_db.sh
    # says where and why); each run gets a fresh database in it.
    pgdir=$(bash scripts/demo_db.sh where)
    echo "demo: PostgreSQL cluster in $pgdir (port ${TARMAC_DEMO_PORT:-55432}; it is kept between runs," \
         "stopped at the end; remove it with: bash scripts/demo_db.sh remove)"
    [ -d "$root/.tarmac/pg" ] &&
        echo "demo: an earlier demo's cluster in $root/.tarmac/pg is no longer used; rm -rf $root/.tarmac removes it"
    TARMAC_DATABASE_URL=$(bash scripts/demo_db.sh start tarmac_demo)
    export TARMAC_DATABASE_URL
    stop_pg='bash "$root/scripts/demo_db.sh" stop'
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The first of 32 ports free now: every job holds a rendezvous port on its
# rank-0 node while it runs (docs/multi-node.md), and every node here is
# 127.0.0.1, where the two-node job's rank 0 listens on its port.
free_range() {
    python3 - <<'PY'
import socket
for _ in range(100):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    base = s.getsockname()[1]
    s.close()
    if base + 31 > 65535:
        continue
    try:
        held = []
        for p in range(base, base + 32):
            t = socket.socket()
            held.append(t)
            t.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        for t in held:
            t.close()
    print(base)
    break
else:
    raise SystemExit("demo: no 32 free ports in a row on 127.0.0.1")
PY
}
port=$(free_port)
rdv_port=$(free_range)
config=$work/demo-local.yaml
sed -e "s|@PORT@|$port|g" -e "s|@RDV_PORT_MIN@|$rdv_port|g" -e "s|@RDV_PORT_MAX@|$((rdv_port + 31))|g" -e "s|@WORK@|$work|g" \
    -e "s|@ROOT@|$root|g" -e "s|@IDLE_GRACE@|$grace|g" config/demo-local.yaml >"$config"

"$tarmac" migrate --config "$config"
TARMAC_TOKEN=$("$tarmac" token create --config "$config" --name "demo-$(date +%s)-$$" --role admin 2>/dev/null)
export TARMAC_TOKEN
# A viewer token for the dashboard, revoked when the run ends.
view_name="demo-dashboard-$(date +%s)-$$"
view_token=$("$tarmac" token create --config "$config" --name "$view_name" --role viewer 2>/dev/null)
"$tarmac" serve --config "$config" --max-wall 400s >"$work/serve.log" 2>&1 &
serve_pid=$!
export TARMAC_URL=http://127.0.0.1:$port
for _ in $(seq 150); do
    curl -fsS "$TARMAC_URL/readyz" >/dev/null 2>&1 && grep -q 'became leader' "$work/serve.log" && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.2
done
grep -q 'became leader' "$work/serve.log" || { cat "$work/serve.log"; echo "demo: the controller did not start" >&2; exit 1; }
echo "demo: the controller serves the API at $TARMAC_URL; each node is a tarmac agent process on this machine"
echo "demo: the dashboard, while the demo runs (the token is revoked at the end):"
echo "demo:   $TARMAC_URL/#token=$view_token"
# Its log, the interesting lines only, until it stops.
tail -n +1 -F --pid="$serve_pid" "$work/serve.log" 2>/dev/null |
    grep --line-buffered -E 'became leader|op=(request_node|node_ready|place|preempt|spot_notice|checkpoint|requeue|terminate|node_gone|launch_failed|gpu_idle)|instance launched|stopping' |
    sed -u -E 's/^[0-9T:.-]+Z level=[a-z]+ //' &
tail_pid=$!

jobs_dir=$work/jobs
start=$(date +%s)
at() { # wait until SECONDS into the run
    local left=$(( start + $1 - $(date +%s) ))
    [ "$left" -le 0 ] || sleep "$left"
}
submit() { # prints the new job's id
    "$tarmac" submit --output json "$@" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["id"])'
}
psql=$(command -v psql || ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)
sql() { "$psql" -X -q -P footer=off -v ON_ERROR_STOP=1 "$TARMAC_DATABASE_URL" -c "$1"; }
field() { # field ID KEY: a field of GET /v1/jobs/ID
    "$tarmac" jobs show "$1" --output json | python3 -c 'import json, sys; v = json.load(sys.stdin).get(sys.argv[1]); v = "" if v is None else str(v); sys.stdout.write(v if v.endswith("\n") else v + "\n")' "$2"
}
wait_state() { # wait_state ID ERE SECONDS
    local end=$(( $(date +%s) + $3 ))
    until field "$1" state | grep -qE "^($2)\$"; do
        [ "$(date +%s)" -lt "$end" ] || return 1
        sleep 0.5
    done
}

echo "demo: wave 1 (tarmac submit): preprocessing, two evaluations, a two-node job, a checkpointing job on spot"
tok=$(submit --team data --name tokenize --class preprocess --gpus 1 --estimate "${t_tok}s" \
    --command "sh $jobs_dir/tokenize.sh $t_tok")
submit --team nlp --name eval-suite --class eval --gpus 1 --estimate "${t_eval}s" --count 2 \
    --command "python3 $jobs_dir/evaluate.py $t_eval" >/dev/null
rdv=$(submit --team nlp --name allreduce --class train --nodes 2 --gpus 2 --estimate "${t_rdv}s" \
    --command "python3 $jobs_dir/allreduce.py $t_rdv")
# exec: Python is the process the agent started (under its wrapper), so
# the checkpoint signal reaches no shell that would die of it first and
# have the rest of the job killed while it writes its checkpoint.
train=$(submit --team vision --name spot-train --class train --gpus 1 --preemptible --checkpointable \
    --pool a100-spot --estimate "$(( train_steps / 2 ))s" --command "exec python3 $jobs_dir/train_ckpt.py $train_steps")

# Interrupt the spot node once the training job has a complete checkpoint.
wait_state "$train" running 60 || { echo "demo: the training job never started" >&2; exit 1; }
spot_node=$(field "$train" node_id)
for _ in $(seq 120); do
    compgen -G "$work/ckpt/job-$train/attempt-*/COMPLETE" >/dev/null && break
    sleep 0.25
done
echo "demo: interrupting spot node $spot_node, where job $train runs (tarmac local interrupt $spot_node --in 15s)"
"$tarmac" local interrupt "$spot_node" --config "$config" --in 15s | sed 's/^/demo:   /'

at "$wave2"
echo "demo: wave 2: more evaluations, inference on quarter GPUs"
submit --team nlp --name eval-suite --class eval --gpus 1 --estimate "${t_eval}s" --count 3 \
    --command "python3 $jobs_dir/evaluate.py $t_eval" >/dev/null
submit --team search --name embed-serve --class inference --gpu-milli 250 --preemptible --estimate "${t_infer}s" \
    --count 4 --command "sh $jobs_dir/infer.sh $t_infer" >/dev/null

# While wave 2 runs: the fleet, and what its GPUs report.
at $(( wave2 + t_eval / 2 + 2 ))
echo
"$tarmac" nodes
echo
echo "demo: the nodes' fake GPUs now, as their agents last sampled them: a GPU a job holds is busy"
sql "SELECT s.node_id AS node, s.gpu_index AS gpu, round(s.util_percent) AS util_percent,
            coalesce((SELECT string_agg(a.job_id::text, ',' ORDER BY a.job_id) FROM job_allocations a
                       WHERE a.node_id = s.node_id AND a.gpu_mask & (1 << s.gpu_index) <> 0), '-') AS jobs
       FROM (SELECT DISTINCT ON (node_id, gpu_index) * FROM gpu_samples
              ORDER BY node_id, gpu_index, at_ms DESC) s
       JOIN nodes n ON n.id = s.node_id AND n.state IN ('ready', 'draining')
      ORDER BY 1, 2" | sed -e '/^$/d' -e 's/^/demo:   /'
echo

at "$wave3"
echo "demo: wave 3: a fine-tune on two GPUs, a last evaluation"
submit --team vision --name finetune --class train --gpus 2 --estimate "${t_eval}s" \
    --command "python3 $jobs_dir/evaluate.py $t_eval" >/dev/null
submit --team nlp --name eval-suite --class eval --gpus 1 --estimate "${t_eval}s" \
    --command "python3 $jobs_dir/evaluate.py $t_eval" >/dev/null

# Done when nothing is queued or running and every node is released.
busy() {
    "$tarmac" jobs --state queued --limit 1 --output json | grep -q '"id"' ||
        "$tarmac" jobs --state running --limit 1 --output json | grep -q '"id"' ||
        "$tarmac" nodes --limit 1 --output json | grep -q '"id"'
}
while kill -0 "$serve_pid" 2>/dev/null && busy; do sleep 1; done
echo
echo "demo: all work done and every node released after $(( $(date +%s) - start )) s of wall time"
echo
"$tarmac" jobs --all
echo
# `tarmac logs` keeps every rank's and attempt's whole output; without it,
# the job's last 4 KB (output_tail) tell the story.
has_logs=
"$tarmac" logs --help >/dev/null 2>&1 && has_logs=1
echo "demo: the two-node job $rdv: its ranks met at TARMAC_MASTER_ADDR:TARMAC_MASTER_PORT and exchanged"
if [ -n "$has_logs" ]; then
    for r in 0 1; do "$tarmac" logs "$rdv" --rank "$r"; done
else
    field "$rdv" output_tail
fi | grep '^allreduce:' | sed 's/^/demo:   /'
echo
echo "demo: the spot job $train, interrupted on node $spot_node, resumed from its checkpoint on node $(field "$train" node_id)"
if [ -n "$has_logs" ]; then
    for a in $(seq 1 "$(field "$train" attempts)"); do "$tarmac" logs "$train" --attempt "$a"; done
else
    field "$train" output_tail
fi | grep -E 'checkpoint signal|stopping|resumed from|finished' | sed 's/^/demo:   /'
echo
if [ -n "$has_logs" ]; then
    echo "demo: job $tok's whole output, past the 4 KB tail (tarmac logs $tok), first and last lines:"
    "$tarmac" logs "$tok" >"$work/tok.log"
    head -n 3 "$work/tok.log" | sed 's/^/demo:   /'
    echo "demo:   ..."
    tail -n 2 "$work/tok.log" | sed 's/^/demo:   /'
    echo "demo:   ($(wc -l <"$work/tok.log") lines, $(wc -c <"$work/tok.log") bytes)"
else
    echo "demo: job $tok's output, its last 4 KB (tarmac jobs show $tok), last lines:"
    field "$tok" output_tail | tail -n 3 | sed 's/^/demo:   /'
fi
echo
echo "demo: what tarmac decided about job $train (tarmac why job $train)"
"$tarmac" why job "$train" --limit 8
"$tarmac" token revoke --config "$config" --name "$view_name" >/dev/null 2>&1 || true
kill -TERM "$serve_pid" 2>/dev/null || true
wait "$serve_pid" || true
echo
echo "demo: summary (tarmac db summary, straight from the database)"
"$tarmac" db summary --config "$config"
echo
python3 scripts/demo_compare.py --config "$config" --tarmac "$tarmac"
