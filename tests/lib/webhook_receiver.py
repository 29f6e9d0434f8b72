#!/usr/bin/env python3
"""Loopback webhook receiver for tests/integration/alerts.sh.

  webhook_receiver.py DIR [--fail-first N]

Binds 127.0.0.1 on a free port and writes it to DIR/port.  Every POST is
appended to DIR/posts.jsonl as one JSON line
  {"n": 1, "path": ..., "content_type": ..., "idempotency_key": ..., "code": 500, "body": {...}}
(body is the parsed JSON, or {"unparsed": text}).  The first N POSTs (default
2) are answered 500, the rest 200; DIR/fail holding a number makes every
POST from then on answer that status instead (0 or absent: back to normal).
Serves until killed.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
count = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        global count
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsed": raw.decode("utf-8", "replace")}
        with lock:
            count += 1
            n = count
            code = 500 if n <= self.server.fail_first else 200
            try:
                with open(os.path.join(self.server.dir, "fail")) as f:
                    forced = int(f.read().strip() or 0)
                if forced:
                    code = forced
            except (OSError, ValueError):
                pass
            rec = {"n": n, "path": self.path, "content_type": self.headers.get("Content-Type"),
                   "idempotency_key": self.headers.get("Idempotency-Key"), "code": code, "body": body}
            with open(os.path.join(self.server.dir, "posts.jsonl"), "a") as f:
                f.write(json.dumps(rec) + "\n")
        out = b'{"ok":true}' if code == 200 else b'{"error":"try later"}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    d = sys.argv[1]
    fail_first = 2
    if len(sys.argv) > 3 and sys.argv[2] == "--fail-first":
        fail_first = int(sys.argv[3])
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.dir = d
    srv.fail_first = fail_first
    open(os.path.join(d, "posts.jsonl"), "w").close()
    with open(os.path.join(d, "port.tmp"), "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
    srv.serve_forever()


if __name__ == "__main__":
    main()
