#!/usr/bin/env python3
"""A fake EC2 instance metadata service (IMDSv2 only) on loopback.

Usage: imds_fixture.py [--ttl SECONDS] [--mode MODE] [--role NAME]

Binds 127.0.0.1 on a free port, prints "tm-imds-fixture port=N" on stdout,
then serves until killed or until its stdin closes (the test died).

  PUT /latest/api/token                       needs X-aws-ec2-metadata-token-ttl-seconds
                                              (1..21600, else 400); answers a fresh token
  GET /latest/meta-data/iam/security-credentials/       role name (401 without a valid token)
  GET /latest/meta-data/iam/security-credentials/ROLE   the credentials JSON (401 likewise)

As the real service, every GET needs X-aws-ec2-metadata-token holding a
token this server issued and that has not expired; anything else is 401.
Each credentials answer is a new set numbered N (1, 2, ...):
AccessKeyId ASIAFIXTURE000N, SecretAccessKey fixture-secret-N-..., Token
fixture-token-N-..., Expiration now + ttl (whole seconds, UTC, "Z").

Modes: normal; norole (role list 404, as with no instance profile);
badjson (credentials are not JSON); wrongtypes (Expiration is a number);
failcode (Code "AssumeRoleUnauthorizedAccess"); slow (credentials after 2 s).
"""
import argparse
import datetime
import json
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKENS = {}
STATE = {"n": 0}
LOCK = threading.Lock()
ARGS = None
BASE = "/latest/meta-data/iam/security-credentials/"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, ctype="text/plain"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.path != "/latest/api/token":
            return self.reply(404, "not found")
        ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        try:
            ttl = int(ttl)
        except (TypeError, ValueError):
            return self.reply(400, "missing or bad X-aws-ec2-metadata-token-ttl-seconds")
        if not 1 <= ttl <= 21600:
            return self.reply(400, "ttl out of range")
        token = "AQAE" + secrets.token_urlsafe(40)
        with LOCK:
            TOKENS[token] = time.time() + ttl
        self.reply(200, token)

    def token_ok(self):
        token = self.headers.get("X-aws-ec2-metadata-token")
        with LOCK:
            exp = TOKENS.get(token)
        return exp is not None and exp > time.time()

    def do_GET(self):
        if not self.path.startswith(BASE):
            return self.reply(404, "not found")
        if not self.token_ok():
            return self.reply(401, "")
        rest = self.path[len(BASE):]
        if ARGS.mode == "norole":
            return self.reply(404, "not found")
        if rest == "":
            return self.reply(200, ARGS.role)
        if rest != ARGS.role:
            return self.reply(404, "not found")
        if ARGS.mode == "slow":
            time.sleep(2)
        with LOCK:
            STATE["n"] += 1
            n = STATE["n"]
        exp = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + \
            datetime.timedelta(seconds=ARGS.ttl)
        doc = {
            "Code": "Success",
            "LastUpdated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "Type": "AWS-HMAC",
            "AccessKeyId": "ASIAFIXTURE%04d" % n,
            "SecretAccessKey": "fixture-secret-%d-wJalrXUtnFEMIK7MDENG" % n,
            "Token": "fixture-token-%d-IQoJb3JpZ2luX2VjEND//////////wEaCXVz" % n,
            "Expiration": exp.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        if ARGS.mode == "badjson":
            return self.reply(200, "{not json")
        if ARGS.mode == "wrongtypes":
            doc["Expiration"] = 1767225600
        if ARGS.mode == "failcode":
            doc = {"Code": "AssumeRoleUnauthorizedAccess", "Message": "no"}
        self.reply(200, json.dumps(doc, indent=2), "text/plain")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--ttl", type=int, default=21600)
    ap.add_argument("--mode", default="normal",
                    choices=["normal", "norole", "badjson", "wrongtypes", "failcode", "slow"])
    ap.add_argument("--role", default="tm-fixture-role")
    ARGS = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("tm-imds-fixture port=%d" % server.server_address[1], flush=True)
    # Stop when the test process goes away and closes our stdin.
    while sys.stdin.read(4096):
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
