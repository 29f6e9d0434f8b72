#!/usr/bin/env python3
"""bench/log_load.py: 100 jobs writing at once, as their agents ship them.

    log_load.py URL TOKEN STREAMS_FILE SECONDS CHUNK BATCH

STREAMS_FILE: one "job attempt node" line per running job.  One thread per
job posts batches of BATCH chunks of CHUNK bytes (random, so nothing
compresses) to POST /v1/nodes/NODE/logs, each batch where the last one
ended, for SECONDS, over a connection of its own: what an agent does for a
job that writes without pause.  Prints "RESULT bytes=N requests=N errors=N
seconds=S p50_ms=X p99_ms=Y".
"""
import base64
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse

url, token, streams_file, seconds, chunk, batch = sys.argv[1:7]
seconds, chunk, batch = float(seconds), int(chunk), int(batch)
u = urllib.parse.urlparse(url)
streams = [tuple(int(x) for x in l.split()) for l in open(streams_file) if l.strip()]
data = base64.b64encode(os.urandom(chunk)).decode()
lock = threading.Lock()
total = {"bytes": 0, "requests": 0, "errors": 0, "lat": []}
start = time.monotonic()
end = start + seconds


def run(job, attempt, node):
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    offset, sent, reqs, errs, lat = 0, 0, 0, 0, []
    while time.monotonic() < end:
        parts = []
        for k in range(batch):
            parts.append('{"job":%d,"attempt":%d,"rank":0,"offset":%d,"data":"%s"}'
                         % (job, attempt, offset + k * chunk, data))
        body = '{"chunks":[' + ",".join(parts) + "]}"
        t0 = time.monotonic()
        try:
            conn.request("POST", "/v1/nodes/%d/logs" % node, body, headers)
            r = conn.getresponse()
            answer = r.read()
            ok = r.status == 200
            if r.status == 409:
                # As the agent does: a batch stored whose answer was lost
                # (past the deadline) is refused as an overlap, and the
                # stream goes on from the offset the controller names.
                offset = json.loads(answer)["next_offset"]
        except OSError:
            conn.close()
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
            ok = False
        lat.append(time.monotonic() - t0)
        reqs += 1
        if ok:
            offset += batch * chunk
            sent += batch * chunk
        else:
            errs += 1
            time.sleep(0.05)
    with lock:
        total["bytes"] += sent
        total["requests"] += reqs
        total["errors"] += errs
        total["lat"].extend(lat)


threads = [threading.Thread(target=run, args=s) for s in streams]
for t in threads:
    t.start()
for t in threads:
    t.join()
took = time.monotonic() - start
lat = sorted(total["lat"]) or [0.0]
print("RESULT bytes=%d requests=%d errors=%d seconds=%.2f p50_ms=%.1f p99_ms=%.1f"
      % (total["bytes"], total["requests"], total["errors"], took,
         lat[len(lat) // 2] * 1000, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000))
