#!/usr/bin/env python3
"""Submit jobs through the API for SECONDS, alternating between URLs, one
Idempotency-Key per job, no retry; print one line per request:
    T_MS STATUS KEY JOB_ID     (JOB_ID - when not 201)
    ha_submit.py TOKEN SECONDS RATE URL [URL...]
"""
import json
import sys
import time
import urllib.error
import urllib.request

token, seconds, rate, urls = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4:]
body = json.dumps({"team": "a", "gpus": 1}).encode()
end = time.time() + seconds
i = 0
while time.time() < end:
    i += 1
    key = "ha-%d" % i
    req = urllib.request.Request(urls[i % len(urls)] + "/v1/jobs", data=body, method="POST", headers={
        "Authorization": "Bearer " + token, "Content-Type": "application/json", "Idempotency-Key": key})
    status, job = 0, "-"
    try:
        with urllib.request.urlopen(req, timeout=3) as r:
            status = r.status
            job = str(json.load(r)["id"])
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception:
        status = 0
    print("%d %d %s %s" % (int(time.time() * 1000), status, key, job), flush=True)
    time.sleep(1.0 / rate)
