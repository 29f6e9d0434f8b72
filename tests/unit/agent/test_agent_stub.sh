#!/usr/bin/env bash
# tests/unit/agent/test_agent_stub.sh: `tarmac agent` against a loopback stub
# of the contract's routes (stub_controller.py): enrollment, exit codes and
# tails, a command that does not exist, a process tree that ignores SIGTERM
# killed whole after the grace, kill -9 and re-adoption (finished once,
# started once), a stale attempt killed, a malformed answer, the log cap,
# a 409 for a terminated node, a metadata notice, and https with --ca-file;
# a container job's env kept from the docker client (env file only); an
# agent that is not root refusing host jobs unless --jobs-as-agent-user;
# the enrollment's address and a rendezvous held while it waits.
# Real processes; no database.
set -euo pipefail
SECONDS=0
BIN=${TM_BIN:?}
SRC=${TM_SOURCE_DIR:?}
# the system interpreter starts in a tenth of the time of a version-manager shim
PY=$(command -v /usr/bin/python3 || command -v python3)
T=$(mktemp -d /tmp/tm-agent-stub.XXXXXX)
# jobs run under users of their own (UIDs without a passwd entry), who
# must pass through the folders above their own
chmod 711 "$T"
STUB_PID=""
AGENT_PID=""
cleanup() {
    [ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null || true
    [ -n "$STUB_PID" ] && kill "$STUB_PID" 2>/dev/null || true
    # job processes left behind: their groups, by the pids this test saw
    for g in $(cat "$T/pgids" 2>/dev/null); do kill -9 -- "-$g" 2>/dev/null || true; done
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "--- agent log" >&2; cat "$T"/agent*.log >&2 || true; exit 1; }

start_stub() { # extra stub args
    rm -f "$T/port"
    "$PY" "$SRC/tests/unit/agent/stub_controller.py" --port-file "$T/port" --record "$T/rec.jsonl" \
        --heartbeat-record "$T/hb.jsonl" --assignments "$T/asg.json" "$@" &
    STUB_PID=$!
    for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
    [ -s "$T/port" ] || fail "stub did not start"
    URL="http://127.0.0.1:$(cat "$T/port")"
}
stop_stub() { kill "$STUB_PID"; wait "$STUB_PID" 2>/dev/null || true; STUB_PID=""; }

start_agent() { # log-name extra-args
    local log=$1; shift
    "$BIN" agent --controller "$URL" --node-id 1 --work-dir "$T/w" --gpu-fake "$T/fake.json" \
        --heartbeat-period 300ms --sample-period 200ms --kill-grace 1s "$@" >"$T/$log" 2>&1 &
    AGENT_PID=$!
}
stop_agent() { kill -TERM "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true; AGENT_PID=""; }

# Remember the process groups of the jobs running now (for cleanup).
note_jobs() {
    "$PY" -c 'import json,sys; print("\n".join(str(j["pid"]) for j in json.load(open(sys.argv[1]))["jobs"]))' \
        "$T/w/state.json" >>"$T/pgids" 2>/dev/null || true
}
# Whether a process of the job still runs: one whose working directory is
# the job's folder (the wrapper's, and its command's unless it moved).
job_alive() {
    local c
    for c in /proc/[0-9]*/cwd; do
        [ "$(readlink "$c" 2>/dev/null)" = "$T/w/jobs/$1" ] && return 0
    done
    return 1
}

# py EXPR: evaluate a Python expression over recs (the recorded requests).
py() {
    "$PY" - "$T/rec.jsonl" "$1" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])] if __import__("os").path.exists(sys.argv[1]) else []
def exits(job): return [r["body"] for r in recs if r["path"].endswith("/jobs/%d/exit" % job)]
def starts(job): return [r["body"] for r in recs if r["path"].endswith("/jobs/%d/start" % job)]
sys.exit(0 if eval(sys.argv[2]) else 1)
PY
}
# live (not zombie) processes of a process group: a killed grandchild waits
# for init to reap it, and a container's init may be slow at that
group_live() { ps -eo pgid=,stat= | awk -v g="$1" '$1 == g && $2 !~ /^Z/' | wc -l; }
wait_for() { # seconds expr
    local n=$(( $1 * 10 ))
    for _ in $(seq "$n"); do py "$2" && return 0; sleep 0.1; done
    fail "timed out waiting for: $2"
}

echo '{"gpus":[{"uuid":"GPU-aaa","util_percent":10},{"uuid":"GPU-bbb","util_percent":90}]}' >"$T/fake.json"
echo enroll-secret-xyz >"$T/secret"

# 1. enrollment; exit 3 with its tail; exit 127 for a missing command; env.
cat >"$T/asg.json" <<'J'
[{"job_id":1,"attempt":1,"command":"echo out-$CUDA_VISIBLE_DEVICES-$TARMAC_ATTEMPT; env | grep -c TARMAC_ENROLL || true; exit 3","gpu_indices":[1]},
 {"job_id":2,"attempt":1,"command":"no-such-command-tm"}]
J
start_stub
# a PATH the jobs' users may search (a folder under /root answers EACCES)
PATH=/usr/local/bin:/usr/bin:/bin start_agent agent1.log --enroll-secret-file "$T/secret" --advertise-addr 10.9.8.7
wait_for 10 'len(exits(1)) == 1 and len(exits(2)) == 1'
py 'exits(1)[0]["exit_code"] == 3 and exits(1)[0]["reason"] == "exited"' || fail "exit 3 not reported"
py 'exits(1)[0]["output_tail"] == "out-GPU-bbb-1\n0\n"' || fail "tail/env wrong: $(tail -c 300 "$T/rec.jsonl")"
py 'exits(2)[0]["exit_code"] == 127 and "not found" in exits(2)[0]["output_tail"]' || fail "127 not reported"
py 'any(r["path"] == "/v1/agent/enroll" for r in recs)' || fail "no enrollment"
"$PY" - "$T/hb.jsonl" <<'PY' || fail "no heartbeat with samples"
import json, sys
hb = [json.loads(l)["body"] for l in open(sys.argv[1])]
ok = any(b["samples"] and b["gpus"][1]["uuid"] == "GPU-bbb" and b["samples"][0]["util_percent"] == 10
         for b in hb)
sys.exit(0 if ok else 1)
PY
[ "$(stat -c %a "$T/w/token")" = 600 ] || fail "token file not 0600"
grep -q enroll-secret-xyz "$T/agent1.log" && fail "secret in the log"
py '[r["body"].get("address") for r in recs if r["path"] == "/v1/agent/enroll"] == ["10.9.8.7"]' \
    || fail "the enrollment did not carry --advertise-addr"
echo "[$SECONDS s] ok 1 exit codes, tails, 127, enrollment"

# 1b. rendezvous: a member whose rendezvous says wait is not started until
# an answer gives the port; then it sees its rank, the nodes and the
# hostfile.  A host name as --advertise-addr is refused at start.
cat >"$T/asg.json" <<'J'
[{"job_id":40,"attempt":1,"command":"echo $TARMAC_NODE_RANK/$TARMAC_NUM_NODES $TARMAC_MASTER_ADDR:$TARMAC_MASTER_PORT $MASTER_PORT; cat $TARMAC_HOSTFILE",
  "rendezvous":{"rank":1,"nodes":2,"gpus_per_node":1,"addrs":["10.9.8.6","10.9.8.7"],"master_port":null,"wait":"no free rendezvous port on node 6"}}]
J
sleep 1.5
py 'len(starts(40)) == 0' || fail "a member whose rendezvous waits was started"
cat >"$T/asg.json" <<'J'
[{"job_id":40,"attempt":1,"command":"echo $TARMAC_NODE_RANK/$TARMAC_NUM_NODES $TARMAC_MASTER_ADDR:$TARMAC_MASTER_PORT $MASTER_PORT; cat $TARMAC_HOSTFILE",
  "rendezvous":{"rank":1,"nodes":2,"gpus_per_node":1,"addrs":["10.9.8.6","10.9.8.7"],"master_port":29517,"wait":null}}]
J
wait_for 10 'len(exits(40)) == 1'
py 'exits(40)[0]["output_tail"] == "1/2 10.9.8.6:29517 29517\n10.9.8.6 slots=1\n10.9.8.7 slots=1\n"' \
    || fail "rendezvous variables: $(tail -c 300 "$T/rec.jsonl")"
echo '[]' >"$T/asg.json"
set +e
"$BIN" agent --controller "$URL" --node-id 1 --work-dir "$T/w8" --advertise-addr node-1.example 2>"$T/agent8.log"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q -- "--advertise-addr: must be an IPv4 or IPv6 address" "$T/agent8.log" \
    || fail "a host name as --advertise-addr not refused (rc $rc): $(cat "$T/agent8.log")"
echo "[$SECONDS s] ok 1b rendezvous: held while waiting, then the variables and the hostfile"

# 2. a tree that ignores SIGTERM, stopped: SIGKILL to the whole group after the grace.
cat >"$T/asg.json" <<'J'
[{"job_id":3,"attempt":1,"command":"trap '' TERM; sh -c 'trap \"\" TERM; sleep 300' & sleep 300"}]
J
wait_for 10 'len(starts(3)) == 1'
PGID=$("$PY" -c "import json;print(json.load(open('$T/w/state.json'))['jobs'][0]['pid'])")
echo "$PGID" >>"$T/pgids"
sleep 0.5
[ "$(group_live "$PGID")" -ge 3 ] || fail "job tree not running"
echo '[]' >"$T/asg.json"
wait_for 10 'len(exits(3)) == 1'
py 'exits(3)[0]["reason"] == "stopped" and exits(3)[0]["signal"] == 9' || fail "not killed after the grace"
[ "$(group_live "$PGID")" = 0 ] || fail "a process of the group survived: $(ps -eo pid,pgid,stat,cmd | awk -v g="$PGID" '$2 == g')"
grep -q "outlived its grace" "$T/agent1.log" || fail "grace kill not logged"
echo "[$SECONDS s] ok 2 whole tree killed after the grace"

# 3. kill -9 the agent while a job runs; restart: re-adopted, reported once,
# started once, also when a stale answer (and a second restart) still list it.
cat >"$T/asg.json" <<'J'
[{"job_id":4,"attempt":1,"command":"sleep 3; echo done4"}]
J
wait_for 10 'len(starts(4)) == 1'
note_jobs
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true; AGENT_PID=""
cat >"$T/asg.json" <<'J'
[{"job_id":4,"attempt":1,"command":"sleep 3; echo done4"},{"job_id":5,"attempt":1,"command":"sleep 30"}]
J
start_agent agent2.log
wait_for 10 'len(starts(5)) == 1'
note_jobs
grep -q 're-adopted" job=4' "$T/agent2.log" || fail "job 4 not re-adopted"
wait_for 10 'len(exits(4)) == 1'
py 'exits(4)[0]["exit_code"] == 0 and exits(4)[0]["output_tail"] == "done4\n"' || fail "job 4 outcome"
sleep 1
py 'len(starts(4)) == 1 and len(exits(4)) == 1' || fail "job 4 started or reported twice"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true; AGENT_PID=""
# killed again and job 5's process replaced by another: lost after the pid check;
# job 4, still listed, is not started again after this restart either
note_jobs
"$PY" - "$T/w/state.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
for j in st["jobs"]:
    j["start_time"] += 1          # as if the pid now named another process
json.dump(st, open(sys.argv[1], "w"))
PY
cat >"$T/asg.json" <<'J'
[{"job_id":4,"attempt":1,"command":"sleep 3; echo done4"}]
J
start_agent agent3.log
wait_for 10 'len(exits(5)) == 1'
py 'exits(5)[0]["reason"] == "lost"' || fail "job 5 should be lost"
sleep 1
py 'len(starts(4)) == 1' || fail "job 4 started again after a restart"
echo "[$SECONDS s] ok 3 re-adoption after kill -9, lost on a start-time mismatch"
stop_agent
# job 5's own process, left alone by the agent as not ours: the cleanup kills it

# 3b. the controller away: said once, samples kept, batched when it returns.
echo '[]' >"$T/asg.json"
cp "$T/fake.json" "$T/fake2.json"
"$PY" -c 'import json; json.dump({"gpus": [{"uuid": "GPU-%d" % i} for i in range(16)]}, open("'"$T"'/fake.json", "w"))'
start_agent agent3b.log --sample-period 100ms
sleep 1
PORT=$(cat "$T/port")
stop_stub
DOWN_MS=$("$PY" -c 'import time; print(int(time.time() * 1000))')
sleep 4
kill -0 "$AGENT_PID" || fail "agent died while the controller was away"
: >"$T/hb.jsonl"
start_stub --port "$PORT"
for _ in $(seq 80); do grep -q "reachable again" "$T/agent3b.log" && break; sleep 0.1; done
grep -q "reachable again" "$T/agent3b.log" || fail "agent did not come back"
[ "$(grep -c 'controller unreachable' "$T/agent3b.log")" = 1 ] || fail "outage not said exactly once"
sleep 0.5
"$PY" - "$T/hb.jsonl" "$DOWN_MS" <<'PY' || fail "samples taken during the outage were not sent"
import json, sys
down = int(sys.argv[2])
hb = [json.loads(l)["body"] for l in open(sys.argv[1])]
during = [s for b in hb for s in b["samples"] if down + 300 <= s["at_ms"] <= down + 3500]
biggest = max(len(b["samples"]) for b in hb)
# 16 GPUs every 100 ms for 3.2 s is 512; a loaded machine samples late, so ask for half;
# the backlog (over 512 in all) must come in batches of at most 512
sys.exit(0 if len(during) >= 256 and biggest <= 512 else 1)
PY
mv "$T/fake2.json" "$T/fake.json"
echo "[$SECONDS s] ok 3b controller away: retried, said once, samples batched after"
stop_agent

# 4. a malformed answer: logged once, nothing changes, no crash.
printf 'RAW:{"assignments":[{"job_id":6,"attempt":1,"comm' >"$T/asg.json"
start_agent agent4.log
sleep 1.5
kill -0 "$AGENT_PID" || fail "agent died on a malformed answer"
[ "$(grep -c 'could not read the heartbeat answer' "$T/agent4.log")" = 1 ] || fail "malformed answer not logged once"

# 4b. no NVML (none on a test machine) and no fake file: one message, heartbeats without samples.
stop_agent
: >"$T/hb.jsonl"
"$BIN" agent --controller "$URL" --node-id 1 --work-dir "$T/w" --heartbeat-period 300ms \
    --sample-period 200ms >"$T/agent4b.log" 2>&1 &
AGENT_PID=$!
sleep 1.5
stop_agent
if ! grep -q 'source=nvml' "$T/agent4b.log"; then
    [ "$(grep -c 'no GPU telemetry' "$T/agent4b.log")" = 1 ] || fail "no-GPU message not said once"
    "$PY" - "$T/hb.jsonl" <<'PY' || fail "heartbeats without a GPU source carried samples"
import json, sys
hb = [json.loads(l)["body"] for l in open(sys.argv[1])]
sys.exit(0 if hb and all(not b["samples"] and not b["gpus"] for b in hb) else 1)
PY
fi

# 5. the log cap: a job writing past it keeps the file bounded and says so.
cat >"$T/asg.json" <<'J'
[{"job_id":7,"attempt":1,"command":"for i in 1 2 3 4 5 6; do head -c 400000 /dev/zero | tr '\\0' x; sleep 0.4; done; echo END"}]
J
start_agent agent5.log --log-cap 100000
wait_for 15 'len(exits(7)) == 1'
py '"bytes dropped" in exits(7)[0]["output_tail"] and exits(7)[0]["output_tail"].endswith("END\n")' || fail "log cap note"
[ "$(stat -c %s "$T/w/jobs/7-1.log")" -le 100000 ] || fail "log file past its cap"
echo "[$SECONDS s] ok 4 malformed answer, log cap"
stop_agent

# 5b. a job with an image: the default template through a fake docker; a
# stopped container job gets `docker kill NAME` (its client may die first).
# The job's variables reach the container only, through the env file: its
# PATH, LD_PRELOAD and DOCKER_HOST never steer the host side (an attacker's
# `docker` first on the job's PATH is never run), and the fake records
# what the client itself was given.
mkdir -p "$T/bin" "$T/evil"
cat >"$T/bin/docker" <<'D'
#!/bin/sh
printf '%s|' "$@" >>"$DOCKER_LOG"; echo >>"$DOCKER_LOG"
echo "hostenv|PATH=$PATH|LD_PRELOAD=${LD_PRELOAD-unset}|DOCKER_HOST=${DOCKER_HOST-unset}|" >>"$DOCKER_LOG"
[ "$1" = run ] || exit 0
envfile=
prev=
for a; do [ "$prev" = --env-file ] && envfile=$a; prev=$a; done
for last; do :; done
# the "container": a shell with the env file's variables (not LD_*: this
# container is the host's own /bin/sh)
[ -z "$envfile" ] || cat "$envfile" >>"$DOCKER_LOG"
exec env -i sh -c 'while IFS= read -r l; do case $l in LD_*) ;; *) export "$l" ;; esac; done <"$1"; exec /bin/sh -c "$2"' \
    sh "${envfile:-/dev/null}" "$last"
D
printf '#!/bin/sh\n: >"%s/pwned"\n' "$T" >"$T/evil/docker"
chmod +x "$T/bin/docker" "$T/evil/docker"
cat >"$T/asg.json" <<J
[{"job_id":10,"attempt":1,"command":"echo in-container \$LR \$CUDA_VISIBLE_DEVICES","image":"reg/img:1","gpu_indices":[1],"env":{"LR":"0.5"}},
 {"job_id":11,"attempt":1,"command":"trap '' TERM; sleep 300","image":"reg/img:2"},
 {"job_id":20,"attempt":1,"command":"echo inside \$PATH","image":"reg/img:3","env":{"PATH":"$T/evil","LD_PRELOAD":"$T/evil/x.so","DOCKER_HOST":"tcp://evil:1"}}]
J
PATH="$T/bin:$PATH" DOCKER_LOG="$T/docker.log" start_agent agent6c.log
wait_for 10 'len(exits(10)) == 1 and len(starts(11)) == 1 and len(exits(20)) == 1'
note_jobs
py 'exits(10)[0]["exit_code"] == 0 and exits(10)[0]["output_tail"] == "in-container 0.5 GPU-bbb\n"' \
    || fail "container job: $(cat "$T/docker.log")"
grep -qE '^run\|--rm\|--name\|tarmac-10-1\|--gpus\|"device=GPU-bbb"\|--env-file\|[^|]*/env/10-1.env\|--\|reg/img:1\|' "$T/docker.log" \
    || fail "docker arguments: $(cat "$T/docker.log")"
py 'exits(20)[0]["exit_code"] == 0 and exits(20)[0]["output_tail"] == "inside '"$T"'/evil\n"' \
    || fail "the job's PATH did not reach its container: $(cat "$T/docker.log")"
[ ! -e "$T/pwned" ] || fail "the job's PATH ran its own docker on the host"
grep -qxF "LD_PRELOAD=$T/evil/x.so" "$T/docker.log" || fail "LD_PRELOAD did not reach the env file"
! grep '^hostenv|' "$T/docker.log" | grep -qE "evil|LD_PRELOAD=[^u]|DOCKER_HOST=[^u]" \
    || fail "the job's env reached the docker client: $(grep '^hostenv|' "$T/docker.log")"
[ "$(stat -c %a "$T/w/env")" = 700 ] || fail "env/ is not the agent's alone"
echo '[]' >"$T/asg.json"
wait_for 10 'len(exits(11)) == 1'
for _ in $(seq 30); do grep -q '^kill|tarmac-11-1|' "$T/docker.log" && break; sleep 0.1; done
grep -q '^kill|tarmac-11-1|' "$T/docker.log" || fail "no docker kill after the stop: $(cat "$T/docker.log")"
[ -z "$(ls -A "$T/w/env")" ] || fail "env files left after their jobs: $(ls "$T/w/env")"
echo "[$SECONDS s] ok 5 container template, docker kill on a stop"
stop_agent

# 5d. an agent that is not root cannot give jobs users of their own: a job
# on the host is refused (127, saying why) unless --jobs-as-agent-user,
# which runs it as the agent's own user and says so loudly at start.
# (Skipped where this test is not root or the binary is closed to nobody.)
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$BIN"; then
    mkdir -p "$T/wn"
    cp "$T/secret" "$T/wn/secret"
    chown -R 65534:65534 "$T/wn"
    chmod 644 "$T/fake.json"
    start_nobody() { # log-name extra-args
        local log=$1; shift
        setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" agent --controller "$URL" --node-id 1 \
            --work-dir "$T/wn/w" --enroll-secret-file "$T/wn/secret" --gpu-fake "$T/fake.json" \
            --heartbeat-period 300ms --sample-period 200ms --kill-grace 1s "$@" >"$T/$log" 2>&1 &
        AGENT_PID=$!
    }
    echo '[{"job_id":30,"attempt":1,"command":"id -u"},{"job_id":31,"attempt":1,"command":"id -u","image":"reg/img:1"}]' \
        >"$T/asg.json"
    PATH="$T/bin:$PATH" DOCKER_LOG="$T/docker.log" start_nobody agent5d.log
    wait_for 10 'len(exits(30)) == 1 and len(exits(31)) == 1'
    py 'exits(30)[0]["exit_code"] == 127 and "user of its own" in exits(30)[0]["output_tail"]' \
        || fail "a host job ran under a non-root agent: $(grep '/jobs/30/exit' "$T/rec.jsonl")"
    py 'exits(31)[0]["exit_code"] == 0' || fail "a container job refused under a non-root agent"
    grep -q "cannot run jobs under users of their own" "$T/agent5d.log" || fail "no warning at start"
    stop_agent
    echo '[{"job_id":32,"attempt":1,"command":"id -u"}]' >"$T/asg.json"
    start_nobody agent5d2.log --jobs-as-agent-user
    wait_for 10 'len(exits(32)) == 1'
    py 'exits(32)[0]["exit_code"] == 0 and exits(32)[0]["output_tail"] == "65534\n"' \
        || fail "--jobs-as-agent-user: $(grep '/jobs/32/exit' "$T/rec.jsonl")"
    grep -q "JOBS ARE NOT ISOLATED" "$T/agent5d2.log" || fail "--jobs-as-agent-user said nothing at start"
    stop_agent
    echo "[$SECONDS s] ok 5d not root: host jobs refused, or run as the agent's user when told"
fi

# 5c. a notice from the (local) metadata service: the interruption posted at
# once, the checkpointable job gets the configured signal with its
# checkpoint directory, the plain one is left to the controller, and the
# notice is acknowledged once no job runs.
cat >"$T/asg.json" <<J
[{"job_id":12,"attempt":3,"command":"trap 'echo saved \$TARMAC_CHECKPOINT_DIR \$TARMAC_ATTEMPT; exit 0' USR1; while :; do sleep 0.1; done","checkpointable":true,"checkpoint_dir":"$T/ck"},
 {"job_id":13,"attempt":1,"command":"sleep 30"}]
J
rm -f "$T/notice.json"
start_agent agent5c.log --metadata local --metadata-url "$T/notice.json" --checkpoint-signal USR1
wait_for 10 'len(starts(12)) == 1 and len(starts(13)) == 1'
note_jobs
echo '{"action":"terminate","event_id":"ev-12"}' >"$T/notice.json"
wait_for 10 'len(exits(12)) == 1'
py 'any(r["path"] == "/v1/nodes/1/interruption" for r in recs)' || fail "interruption not posted"
py 'exits(12)[0]["reason"] == "stopped" and exits(12)[0]["output_tail"].endswith("/ck/attempt-3 3\n")' \
    || fail "checkpoint signal: $(grep '/12/exit' "$T/rec.jsonl")"
py 'len(exits(13)) == 0' || fail "the plain job was stopped by the notice itself"
echo '[]' >"$T/asg.json"
wait_for 10 'len(exits(13)) == 1'
for _ in $(seq 30); do grep -q "acknowledged" "$T/agent5c.log" && break; sleep 0.1; done
grep -q "interruption acknowledged" "$T/agent5c.log" || fail "notice not acknowledged once drained"
echo "[$SECONDS s] ok 5c notice: interruption posted, checkpoint signal, acknowledged when drained"
stop_agent
stop_stub

# 6. a stale attempt (409 on start) is killed; 7. a terminated node (409) stops cleanly.
cat >"$T/asg.json" <<'J'
[{"job_id":8,"attempt":1,"command":"sleep 300"}]
J
start_stub --stale-starts
start_agent agent6.log
wait_for 10 'len(starts(8)) == 1'
for _ in $(seq 50); do job_alive 8-1 || break; sleep 0.1; done
job_alive 8-1 && fail "stale attempt still running"
stop_agent
stop_stub
cat >"$T/asg.json" <<'J'
[{"job_id":9,"attempt":1,"command":"sleep 300"}]
J
start_stub
start_agent agent7.log
wait_for 10 'len(starts(9)) == 1'
note_jobs
stop_stub
start_stub --terminated
# the agent notices the new port only through a new URL: restart it against the 409 stub
stop_agent
start_agent agent7b.log
for _ in $(seq 100); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$AGENT_PID" 2>/dev/null && fail "agent did not exit on 409"
wait "$AGENT_PID"; rc=$?; AGENT_PID=""
[ "$rc" = 0 ] || fail "agent exit status $rc on 409"
[ "$(grep -c 'terminated or interrupted' "$T/agent7b.log")" = 1 ] || fail "409 not said once"
job_alive 9-1 && fail "job left running on a terminated node"
echo "[$SECONDS s] ok 6 stale attempt killed, terminated node stops cleanly"
stop_stub

# 7. https: enrolled through --ca-file; without it the certificate is refused;
# plain http to a host that is not loopback is refused before anything is sent.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout "$T/key.pem" \
    -out "$T/cert.pem" -addext subjectAltName=DNS:localhost,IP:127.0.0.1 >/dev/null 2>&1
echo '[]' >"$T/asg.json"
: >"$T/rec.jsonl"
start_stub --tls-cert "$T/cert.pem" --tls-key "$T/key.pem"
URL="https://localhost:$(cat "$T/port")"
rm -rf "$T/w"
start_agent agent8.log --enroll-secret-file "$T/secret"
sleep 1.5
grep -q "could not enroll" "$T/agent8.log" || fail "an unknown certificate was accepted"
stop_agent
start_agent agent8b.log --enroll-secret-file "$T/secret" --ca-file "$T/cert.pem"
for _ in $(seq 50); do grep -q '"enrolled"' "$T/agent8b.log" && break; sleep 0.1; done
grep -q '"enrolled"' "$T/agent8b.log" || fail "https enrollment with --ca-file"
stop_agent
set +e
"$BIN" agent --controller http://10.1.2.3:8080 --node-id 1 --work-dir "$T/w9" 2>"$T/agent9.log"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "in the clear" "$T/agent9.log" || fail "plain http to a remote host not refused (rc $rc)"
[ -e "$T/w9" ] && fail "a refused start created its work directory"
echo "[$SECONDS s] ok 7 https with --ca-file, unknown certificate refused, remote plain http refused"

# 8. A clock the controller refuses (400 naming samples[0].at_ms): the
# agent logs it once, drops those samples and sends a bare heartbeat at
# once, so that the node stays heard of.
stop_stub
echo '[]' >"$T/asg.json"
: >"$T/hb.jsonl"
start_stub --refuse-sample-times
rm -rf "$T/w"
start_agent agent10.log --enroll-secret-file "$T/secret"
sleep 3
stop_agent
stop_stub
"$PY" - "$T/hb.jsonl" <<'PY' || fail "refused sample times: heartbeats were not followed by bare ones"
import json, sys
hbs = [bool(json.loads(l)["body"].get("samples")) for l in open(sys.argv[1])]
refused = [i for i, s in enumerate(hbs) if s]
assert len(refused) >= 2 and len(hbs) - len(refused) >= 2, hbs
assert all(i + 1 == len(hbs) or not hbs[i + 1] for i in refused), hbs
PY
[ "$(grep -c "is this node's clock off" "$T/agent10.log")" = 1 ] || fail "the refused clock was not logged once"
echo "[$SECONDS s] ok 8 refused sample times: bare heartbeats in between, logged once"
