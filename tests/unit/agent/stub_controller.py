#!/usr/bin/env python3
"""tests/unit/agent/stub_controller.py: the agent contract's routes, canned.

A tiny loopback stand-in for the controller, for the agent's own tests and
bench/run-agent.sh (the end-to-end tests against the real controller are
agent-local's).  Every request is appended to --record as one JSON line
{"method","path","auth","body"}.  The heartbeat answer is read from
--assignments (a JSON file holding the "assignments" list, re-read on every
heartbeat, so a test changes it while the agent runs).  Files named by
--fail-heartbeats (a count in a file) make that many heartbeats answer 503;
--terminated makes every heartbeat answer 409; --stale-starts answers 409
to starts; --refuse-sample-times answers a heartbeat carrying samples 400
naming samples[0].at_ms, as the controller does to a node whose clock is
off.  Prints the port it listens on to --port-file.
"""
import argparse
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = "agent-token-0123456789abcdef"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0, help="listen here (a restarted stub keeps its port)")
    ap.add_argument("--record", required=True)
    ap.add_argument("--assignments")
    ap.add_argument("--secret", default="enroll-secret-xyz")
    ap.add_argument("--terminated", action="store_true")
    ap.add_argument("--stale-starts", action="store_true")
    ap.add_argument("--refuse-sample-times", action="store_true")
    ap.add_argument("--quiet-record", action="store_true", help="record only the paths")
    ap.add_argument("--heartbeat-record", help="heartbeats go here instead of --record")
    ap.add_argument("--tls-cert", help="serve https with this certificate (PEM) ...")
    ap.add_argument("--tls-key", help="... and this key")
    args = ap.parse_args()
    lock = threading.Lock()

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent was killed mid-answer, as the tests do on purpose

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"unparsable": raw.decode("latin-1")}
            rec = {"method": "POST", "path": self.path, "auth": self.headers.get("Authorization")}
            if not args.quiet_record:
                rec["body"] = body
            target = args.record
            if args.heartbeat_record and self.path.endswith("/heartbeat"):
                target = args.heartbeat_record
            with lock:
                with open(target, "a") as f:
                    f.write(json.dumps(rec) + "\n")
            p = self.path
            if p == "/v1/agent/enroll":
                if body and body.get("secret") == args.secret:
                    return self.reply(201, {"node_id": body.get("node_id"), "token": TOKEN})
                return self.reply(401, {"error": "enrollment refused"})
            if self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.reply(401, {"error": "bad token"})
            if p.endswith("/heartbeat"):
                if args.terminated:
                    return self.reply(409, {"error": "node is terminated", "field": "node"})
                if args.refuse_sample_times and body and body.get("samples"):
                    return self.reply(400, {"error": "is in the future (more than agent.clock_skew after"
                                            " the controller's clock)", "field": "samples[0].at_ms"})
                assignments = []
                if args.assignments and os.path.exists(args.assignments):
                    try:
                        with open(args.assignments) as f:
                            text = f.read()
                        if text.startswith("RAW:"):
                            data = text[4:].encode()
                            self.send_response(200)
                            self.send_header("Content-Length", str(len(data)))
                            self.end_headers()
                            self.wfile.write(data)
                            return
                        assignments = json.loads(text)
                    except ValueError:
                        assignments = []
                return self.reply(200, {"node": {"id": 1, "state": "ready", "draining": False},
                                        "assignments": assignments})
            if p.endswith("/start"):
                if args.stale_starts:
                    return self.reply(409, {"error": "stale attempt", "field": "attempt"})
                return self.reply(200, {"ok": True})
            if p.endswith("/exit") or p.endswith("/interruption"):
                return self.reply(200, {"ok": True})
            return self.reply(404, {"error": "no such route"})

    ThreadingHTTPServer.allow_reuse_address = True
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), H)
    if args.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.tls_cert, args.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
