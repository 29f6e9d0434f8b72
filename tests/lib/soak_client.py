#!/usr/bin/env python3
"""The soak's API workload (scripts/soak.sh): until STOP_FILE exists, submit
jobs (one Idempotency-Key per job, retried with the same key on a timeout,
a reset, 429 or 5xx, across the replicas), cancel and retag jobs it was
told about, and raise team b's hard budget, all drawn from SEED.  Then it
retries every key it gave up on until the API answers (the key makes the
retry safe), so that every job it asked for ends acknowledged or refused.

    soak_client.py SEED STOP_FILE OUT_FILE TOKEN_A TOKEN_B TOKEN_ADMIN URL [URL...]

OUT_FILE gets one line per outcome:
    ack KEY JOB_ID STATUS        a 201 (or the replayed first answer)
    mismatch KEY JOB_ID JOB_ID2  the same key answered with two jobs (a bug)
    refused KEY STATUS           a 4xx other than 408/429 (a bug in the soak)
    gaveup KEY                   every retry failed (retried again at the end)
    cancel JOB_ID STATUS | retag JOB_ID STATUS | budget CAP STATUS
    tries N                      requests sent in all
"""
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

seed, stop_file, out_file, tok_a, tok_b, tok_admin = sys.argv[1:7]
urls = sys.argv[7:]
rng = random.Random(int(seed) * 7919 + 1)
out = open(out_file, "a", buffering=1)
tries = 0
RETRYABLE = (0, 408, 429, 500, 502, 503, 504)


def call(method, path, token, body=None, key=None, url=None):
    """One request; returns (status, parsed body or None).  0: no answer."""
    global tries
    tries += 1
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if key:
        headers["Idempotency-Key"] = key
    req = urllib.request.Request((url or rng.choice(urls)) + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=4) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, None
    except Exception:
        return 0, None


acked = {}      # key -> job id
jobs = []       # job ids acknowledged, with their team's token
pending = {}    # key -> (body, token): given up, retried at the end


def submit(key, body, token, attempts):
    for i in range(attempts):
        st, js = call("POST", "/v1/jobs", token, body, key, urls[i % len(urls)])
        if st in (200, 201) and js and "id" in js:
            jid = js["id"]
            if key in acked and acked[key] != jid:
                out.write("mismatch %s %d %d\n" % (key, acked[key], jid))
            acked[key] = jid
            jobs.append((jid, token))
            out.write("ack %s %d %d\n" % (key, jid, st))
            pending.pop(key, None)
            return True
        if st not in RETRYABLE:
            out.write("refused %s %d\n" % (key, st))
            pending.pop(key, None)
            return True
        time.sleep(min(0.25 * (2 ** i), 2.0))
    return False


cap = 40
n = 0
while not os.path.exists(stop_file):
    r = rng.random()
    if r < 0.70:
        n += 1
        key = "soak-%s-%d" % (seed, n)
        team, token = ("b", tok_b) if rng.random() < 0.3 else ("a", tok_a)
        body = {"team": team, "gpus": rng.choice([1, 1, 2, 4, 8]),
                "runtime_estimate_s": rng.randint(2, 8), "preemptible": rng.random() < 0.3}
        if not submit(key, body, token, 5):
            pending[key] = (body, token)
            out.write("gaveup %s\n" % key)
    elif r < 0.82 and jobs:
        jid, token = rng.choice(jobs)
        st, _ = call("POST", "/v1/jobs/%d/cancel" % jid, token, {"reason": "soak"})
        out.write("cancel %d %d\n" % (jid, st))
    elif r < 0.95 and jobs:
        jid, token = rng.choice(jobs)
        st, _ = call("PATCH", "/v1/jobs/%d" % jid, token, {"preemptible": rng.random() < 0.5})
        out.write("retag %d %d\n" % (jid, st))
    else:
        # Only ever raised, so the final cap bounds the whole month's spend.
        cap += rng.randint(0, 15)
        st, _ = call("PUT", "/v1/budgets/b", tok_admin,
                     {"cap_cents": cap, "period": "month", "hard": True, "warn_percent": 80})
        out.write("budget %d %d\n" % (cap, st))
    time.sleep(rng.uniform(0.05, 0.25))

# Recovery: the keys given up on, until each is answered (bounded).
end = time.time() + 60
while pending and time.time() < end:
    for key, (body, token) in list(pending.items()):
        submit(key, body, token, 1)
    time.sleep(0.5)
for key in pending:
    out.write("unanswered %s\n" % key)
out.write("tries %d\n" % tries)
