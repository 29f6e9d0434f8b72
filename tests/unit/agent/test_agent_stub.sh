#!/usr/bin/env bash
# tests/unit/agent/test_agent_stub.sh: `tarmac agent` against a loopback stub
# of the contract's routes (stub_controller.py): enrollment, exit codes and
# tails, a command that does not exist, a process tree that ignores SIGTERM
# killed whole after the grace, kill -9 and re-adoption (finished once,
# started once), a stale attempt killed, a malformed answer, the log cap,
# and a 409 for a terminated node.  Real processes; no database.
set -euo pipefail
SECONDS=0
BIN=${TM_BIN:?}
SRC=${TM_SOURCE_DIR:?}
# the system interpreter starts in a tenth of the time of a version-manager shim
PY=$(command -v /usr/bin/python3 || command -v python3)
T=$(mktemp -d /tmp/tm-agent-stub.XXXXXX)
STUB_PID=""
AGENT_PID=""
cleanup() {
    [ -n "$AGENT_PID" ] && kill -9 "$AGENT_PID" 2>/dev/null || true
    [ -n "$STUB_PID" ] && kill "$STUB_PID" 2>/dev/null || true
    # any job process left behind belongs to this test's work dirs
    pkill -9 -f "$T/" 2>/dev/null || true
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
start_agent agent1.log --enroll-secret-file "$T/secret"
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
echo "[$SECONDS s] ok 1 exit codes, tails, 127, enrollment"

# 2. a tree that ignores SIGTERM, stopped: SIGKILL to the whole group after the grace.
cat >"$T/asg.json" <<'J'
[{"job_id":3,"attempt":1,"command":"trap '' TERM; sh -c 'trap \"\" TERM; sleep 300' & sleep 300"}]
J
wait_for 10 'len(starts(3)) == 1'
PGID=$("$PY" -c "import json;print(json.load(open('$T/w/state.json'))['jobs'][0]['pid'])")
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
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true; AGENT_PID=""
cat >"$T/asg.json" <<'J'
[{"job_id":4,"attempt":1,"command":"sleep 3; echo done4"},{"job_id":5,"attempt":1,"command":"sleep 30"}]
J
start_agent agent2.log
wait_for 10 'len(starts(5)) == 1'
grep -q 're-adopted" job=4' "$T/agent2.log" || fail "job 4 not re-adopted"
wait_for 10 'len(exits(4)) == 1'
py 'exits(4)[0]["exit_code"] == 0 and exits(4)[0]["output_tail"] == "done4\n"' || fail "job 4 outcome"
sleep 1
py 'len(starts(4)) == 1 and len(exits(4)) == 1' || fail "job 4 started or reported twice"
kill -9 "$AGENT_PID"; wait "$AGENT_PID" 2>/dev/null || true; AGENT_PID=""
# killed again and job 5's process replaced by another: lost after the pid check;
# job 4, still listed, is not started again after this restart either
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
pkill -9 -f "sleep 30" 2>/dev/null || true   # job 5's own process, left alone as not ours

# 3b. the controller away: said once, samples kept, batched when it returns.
echo '[]' >"$T/asg.json"
start_agent agent3b.log
sleep 1
PORT=$(cat "$T/port")
stop_stub
DOWN_MS=$("$PY" -c 'import time; print(int(time.time() * 1000))')
sleep 2.5
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
during = [s for b in hb for s in b["samples"] if down + 300 <= s["at_ms"] <= down + 2000]
sys.exit(0 if len(during) >= 4 else 1)
PY
echo "[$SECONDS s] ok 3b controller away: retried, said once, samples batched after"
stop_agent

# 4. a malformed answer: logged once, nothing changes, no crash.
printf 'RAW:{"assignments":[{"job_id":6,"attempt":1,"comm' >"$T/asg.json"
start_agent agent4.log
sleep 1.5
kill -0 "$AGENT_PID" || fail "agent died on a malformed answer"
[ "$(grep -c 'could not read the heartbeat answer' "$T/agent4.log")" = 1 ] || fail "malformed answer not logged once"

# 5. the log cap: a job writing past it keeps the file bounded and says so.
cat >"$T/asg.json" <<'J'
[{"job_id":7,"attempt":1,"command":"for i in 1 2 3 4 5 6; do head -c 400000 /dev/zero | tr '\\0' x; sleep 0.4; done; echo END"}]
J
stop_agent
start_agent agent5.log --log-cap 100000
wait_for 15 'len(exits(7)) == 1'
py '"bytes dropped" in exits(7)[0]["output_tail"] and exits(7)[0]["output_tail"].endswith("END\n")' || fail "log cap note"
[ "$(stat -c %s "$T/w/jobs/7-1.log")" -le 100000 ] || fail "log file past its cap"
echo "[$SECONDS s] ok 4 malformed answer, log cap"
stop_agent

# 5b. a job with an image: the default template through a fake docker; a
# stopped container job gets `docker kill NAME` (its client may die first).
mkdir -p "$T/bin"
cat >"$T/bin/docker" <<'D'
#!/bin/sh
printf '%s|' "$@" >>"$DOCKER_LOG"; echo >>"$DOCKER_LOG"
[ "$1" = run ] || exit 0
for last; do :; done
exec /bin/sh -c "$last"
D
chmod +x "$T/bin/docker"
cat >"$T/asg.json" <<'J'
[{"job_id":10,"attempt":1,"command":"echo in-container $LR $CUDA_VISIBLE_DEVICES","image":"reg/img:1","gpu_indices":[1],"env":{"LR":"0.5"}},
 {"job_id":11,"attempt":1,"command":"trap '' TERM; sleep 300","image":"reg/img:2"}]
J
PATH="$T/bin:$PATH" DOCKER_LOG="$T/docker.log" start_agent agent6c.log
wait_for 10 'len(exits(10)) == 1 and len(starts(11)) == 1'
py 'exits(10)[0]["exit_code"] == 0 and exits(10)[0]["output_tail"] == "in-container 0.5 GPU-bbb\n"' \
    || fail "container job: $(cat "$T/docker.log")"
grep -qF 'run|--rm|--name|tarmac-10-1|--gpus|"device=GPU-bbb"|-e|LR|-e|CUDA_VISIBLE_DEVICES|' "$T/docker.log" \
    || fail "docker arguments: $(cat "$T/docker.log")"
echo '[]' >"$T/asg.json"
wait_for 10 'len(exits(11)) == 1'
for _ in $(seq 30); do grep -q '^kill|tarmac-11-1|' "$T/docker.log" && break; sleep 0.1; done
grep -q '^kill|tarmac-11-1|' "$T/docker.log" || fail "no docker kill after the stop: $(cat "$T/docker.log")"
echo "[$SECONDS s] ok 5 container template, docker kill on a stop"
stop_agent
stop_stub

# 6. a stale attempt (409 on start) is killed; 7. a terminated node (409) stops cleanly.
cat >"$T/asg.json" <<'J'
[{"job_id":8,"attempt":1,"command":"sleep 300"}]
J
start_stub --stale-starts
start_agent agent6.log
wait_for 10 'len(starts(8)) == 1'
for _ in $(seq 50); do pgrep -f "tarmac-job sleep 300" >/dev/null || break; sleep 0.1; done
pgrep -f "tarmac-job sleep 300" >/dev/null && fail "stale attempt still running"
stop_agent
stop_stub
cat >"$T/asg.json" <<'J'
[{"job_id":9,"attempt":1,"command":"sleep 300"}]
J
start_stub
start_agent agent7.log
wait_for 10 'len(starts(9)) == 1'
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
pgrep -f "tarmac-job sleep 300" >/dev/null && fail "job left running on a terminated node"
echo "[$SECONDS s] ok 6 stale attempt killed, terminated node stops cleanly"
