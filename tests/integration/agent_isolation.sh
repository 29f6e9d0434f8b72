#!/usr/bin/env bash
# Jobs cannot reach the agent, each other or the controller (local
# provider, real agents running as root, so each host job runs under a
# user of its own).  A victim job holds a secret in its env; an attacker
# job placed on the same node tries to read the agent's token (../token,
# ../../token and the absolute path), its state and enrollment secret, the
# victim's log, every process's /proc/PID/environ (the victim's and
# `tarmac serve`'s, which holds a secret of its own), and to signal the
# victim's processes.  Everything it could read goes into files it owns
# and its output: none of the secrets may appear there, no read and no
# signal may succeed, and the victim ends as it would have.
# Then the container side through the API: images that are runtime options
# or not ASCII and env names that steer the host's runtime answer 400
# naming the field; a container job whose env sets PATH (to a folder
# holding an attacker's `docker`) and LD_PRELOAD runs through a recording
# fake docker on the agents' PATH that sees neither, while its container
# does.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

SERVE_SECRET=serve-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
VICTIM_SECRET=victim-secret-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
# The fake docker (the agents' PATH is serve's): it records its arguments
# and its own environment, then runs the command with the env file's
# variables as the "container" would (not LD_*: this container is the
# host's own /bin/sh).
mkdir -p "$WORK/bin" "$WORK/evil"
cat >"$WORK/bin/docker" <<D
#!/bin/sh
printf '%s|' "\$@" >>"$WORK/docker.log"; echo >>"$WORK/docker.log"
echo "hostenv|PATH=\$PATH|LD_PRELOAD=\${LD_PRELOAD-unset}|" >>"$WORK/docker.log"
[ "\$1" = run ] || exit 0
envfile=; prev=
for a; do [ "\$prev" = --env-file ] && envfile=\$a; prev=\$a; done
for last; do :; done
cat "\$envfile" >>"$WORK/docker.log"
exec env -i sh -c 'while IFS= read -r l; do case \$l in LD_*) ;; *) export "\$l" ;; esac; done <"\$1"; exec /bin/sh -c "\$2"' \
    sh "\$envfile" "\$last"
D
printf '#!/bin/sh\n: >"%s/pwned"\n' "$WORK" >"$WORK/evil/docker"
chmod 755 "$WORK/bin/docker" "$WORK/evil/docker" "$WORK/bin" "$WORK/evil"
export TM_ISOLATION_SERVE_SECRET=$SERVE_SECRET # `tarmac serve` inherits it
PATH="$WORK/bin:$PATH" E2E_IDLE_GRACE=30s e2e_start itest_agent_isolation
unset TM_ISOLATION_SERVE_SECRET

# The API refuses images that are options or not ASCII, and env names that
# steer the host's runtime, naming the field; nothing is stored.
refused() { # BODY FIELD
    local code
    code=$(curl -sS -o "$WORK/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $ADMIN" \
        -H 'Content-Type: application/json' --data "$1" "$BASE/v1/jobs")
    [ "$code" = 400 ] || fail "$1: answered $code, expected 400"
    [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("field"))' "$WORK/body")" = "$2" ] \
        || fail "$1: $(cat "$WORK/body"), expected the field $2"
}
refused '{"team":"vision","gpus":1,"image":"--privileged","command":"id"}' image
refused '{"team":"vision","gpus":1,"image":"-v/:/host","command":"id"}' image
refused '{"team":"vision","gpus":1,"image":"--entrypoint=/bin/sh","command":"id"}' image
refused '{"team":"vision","gpus":1,"image":"im\u00e4ge","command":"id"}' image
refused '{"team":"vision","gpus":1,"image":"reg/img","env":{"NVIDIA_VISIBLE_DEVICES":"all"},"command":"id"}' \
    env.NVIDIA_VISIBLE_DEVICES
[ "$(psql_q "SELECT count(*) FROM jobs")" = 0 ] || fail "a refused job was stored"

V=$(submit '{"team":"vision","gpus":1,"pool":"od","env":{"WANDB_API_KEY":"'"$VICTIM_SECRET"'"},"command":"echo victim-up; for i in $(seq 40); do sleep 0.5; done; echo victim-marker-done"}')
wait_job "$V" running 40
NV=$(node_of_job "$V")
D=$(node_dir "$NV")
wait_for 10 "[ -s $D/work/token ]" || fail "node $NV's agent stored no token"
TOKEN=$(cat "$D/work/token")
# The node's agent did not inherit serve's environment (the provider gives
# it PATH, HOME, LANG, TMPDIR, TZ and its own variables only).
AP=$(agent_pid "$NV")
[ "$AP" != 0 ] || fail "no agent for node $NV"
! tr '\0' '\n' <"/proc/$AP/environ" | grep -qF "$SERVE_SECRET" || fail "serve's environment reached the agent"
SECRET=$(cat "$D/work/enroll.secret")

# The attacker: each attempt prints "denied WHAT" or "READ WHAT"; what it
# reads is kept in ./loot (its own folder) and printed at the end.
read -r -d '' ATTACK <<SH || true
echo "ids: \$(id -u) \$(id -G) home=\$HOME"
w=\$TM_LOCAL_NODE_DIR/work
for f in ../token ../../token \$w/token \$w/state.json \$w/enroll.secret ../$V-1.log ../$V-1/.status; do
  if cat "\$f" >>loot 2>/dev/null; then echo "READ \$f"; else echo "denied \$f"; fi
done
if ls \$w/jobs >>loot 2>/dev/null; then echo "READ jobs/"; else echo "denied jobs/"; fi
for e in /proc/[0-9]*/environ; do
  case \$e in /proc/\$\$/*|/proc/self/*) continue;; esac
  if tr '\\0' '\\n' <"\$e" 2>/dev/null | grep -q '^WANDB_API_KEY=\|^TM_ISOLATION_SERVE_SECRET='; then
    tr '\\0' '\\n' <"\$e" >>loot 2>/dev/null; echo "READ \$e"
  fi
done
n=0
for p in \$(pgrep -f 'victim-marker-don[e]'); do
  n=\$((n + 1))
  if kill -STOP "\$p" 2>/dev/null; then echo "SIGNALLED \$p"; else echo "denied signal"; fi
done
echo "victims seen: \$n"
cat loot 2>/dev/null
echo attack-done
SH
A=$(submit "$(python3 -c 'import json,sys; print(json.dumps({"team":"other","gpus":1,"pool":"od","command":sys.argv[1]}))' "$ATTACK")")
wait_job "$A" 'succeeded|failed' 40
[ "$(node_of_job "$A")" = "$NV" ] || [ "$(psql_q "SELECT node_id FROM jobs WHERE id = $A")" = "$NV" ] \
    || fail "the attacker ran on node $(psql_q "SELECT node_id FROM jobs WHERE id = $A"), not beside the victim on $NV"
LOG=$D/work/jobs/$A-1.log
cat "$LOG" >"$WORK/attacker.out" 2>/dev/null || true
grep -q attack-done "$LOG" || fail "the attacker did not finish: $(cat "$LOG")"
# its own user and group, no other group (root's 0 dropped), HOME its folder
grep -qE "^ids: ([0-9]+) \1 home=$D/work/jobs/$A-1\$" "$LOG" || fail "the attacker's ids: $(grep '^ids' "$LOG")"
! grep -qE '^ids: 0 ' "$LOG" || fail "the attacker ran as root"
! grep -q '^READ' "$LOG" || fail "the attacker read what it must not: $(grep '^READ' "$LOG")"
! grep -q '^SIGNALLED' "$LOG" || fail "the attacker signalled the victim: $(grep '^SIGNALLED' "$LOG")"
grep -q '^denied ../token$' "$LOG" && grep -q "^denied .*/work/token$" "$LOG" || fail "no token attempt: $(cat "$LOG")"
grep -q '^victims seen: [1-9]' "$LOG" && grep -q '^denied signal$' "$LOG" \
    || fail "the attacker saw no victim process to signal: $(cat "$LOG")"
# The secrets appear nowhere the attacker could write: its log, its folder
# (its loot), its output tail.
for s in "$TOKEN" "$SECRET" "$VICTIM_SECRET" "$SERVE_SECRET"; do
    grep -rqF -- "$s" "$LOG" "$D/work/jobs/$A-1" && fail "a secret reached the attacker's files"
    [ "$(psql_q "SELECT count(*) FROM jobs WHERE id = $A AND output_tail LIKE '%$s%'")" = 0 ] \
        || fail "a secret reached the attacker's output tail"
done
# The victim ran on untouched (a SIGSTOP would have held it past its end).
wait_job "$V" succeeded 40
psql_q "SELECT output_tail FROM jobs WHERE id = $V" | grep -q victim-marker-done || fail "the victim's tail"

# A container job's PATH and LD_PRELOAD reach its container only.
C=$(submit '{"team":"vision","gpus":1,"pool":"od","image":"reg.example/team/img:1","env":{"PATH":"'"$WORK/evil"'","LD_PRELOAD":"'"$WORK/evil/x.so"'"},"command":"echo inside $PATH"}')
wait_job "$C" 'succeeded|failed' 40
[ ! -e "$WORK/pwned" ] || fail "the job's PATH ran its own docker on the host"
grep -q '^run|' "$WORK/docker.log" || fail "the fake docker never ran: $(psql_q "SELECT output_tail FROM jobs WHERE id = $C")"
! grep '^hostenv|' "$WORK/docker.log" | grep -qE "evil|LD_PRELOAD=[^u]" \
    || fail "the job's env reached the docker client: $(grep '^hostenv|' "$WORK/docker.log")"
grep -qxF "LD_PRELOAD=$WORK/evil/x.so" "$WORK/docker.log" || fail "LD_PRELOAD did not reach the container's env file"
grep -qE '^run\|.*\|--env-file\|[^|]*/work/env/'"$C"'-1\.env\|--\|reg\.example/team/img:1\|' "$WORK/docker.log" \
    || fail "docker arguments: $(cat "$WORK/docker.log")"
psql_q "SELECT output_tail FROM jobs WHERE id = $C" | grep -qx "inside $WORK/evil" \
    || fail "the container did not get the job's PATH: $(psql_q "SELECT output_tail FROM jobs WHERE id = $C")"
secrets_absent
echo "1 passed, 0 failed"
