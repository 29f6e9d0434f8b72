#!/usr/bin/env python3
"""Loopback fakes of the three clouds' instance metadata services, for
interruption notices (../shared/specs/spot-interruption-signals.md).

Usage: metadata_fixture.py --cloud aws|gcp|azure [--port-file FILE] [--detach]

Binds 127.0.0.1 on a free port and prints "tm-metadata-fixture port=N" on
stdout (and into --port-file).  Serves until killed, or, without --detach,
until its stdin closes (the test that started it died).

Several nodes share one fake: a path may start with /n/NAME, which selects
NAME's own state (the local provider hands each agent BASE/n/NODE_ID);
without it the state is the default node "".

The services, as the clouds document them:
  aws    PUT /latest/api/token (X-aws-ec2-metadata-token-ttl-seconds 1..21600,
         else 400) gives a token; every GET needs X-aws-ec2-metadata-token
         (else 401).  GET /latest/meta-data/spot/instance-action and
         /latest/meta-data/events/recommendations/rebalance: 404 (XHTML page,
         as the real service) until raised.
  gcp    Every request needs Metadata-Flavor: Google (else 403).
         GET /computeMetadata/v1/instance/preempted (FALSE|TRUE) and
         .../maintenance-event (NONE|TERMINATE_ON_HOST_MAINTENANCE), with
         ETag; ?wait_for_change=true blocks until the value differs from
         last_etag (or, without it, changes) or timeout_sec passes.
  azure  GET /metadata/scheduledevents?api-version=V needs Metadata: true
         (else 400) and api-version (else 400); POST the same with
         {"StartRequests":[{"EventId":ID}]} acknowledges: the event is
         recorded as acked and leaves the document (incarnation + 1).

Control endpoints (any cloud; node= selects the node, default ""):
  POST /_fixture/interrupt?node=N[&action=terminate|stop|hibernate|preempt|
        maintenance|rebalance][&in=SECONDS]
       aws: instance-action with time now+in (default 120) or the rebalance
       item; gcp: preempted TRUE (or maintenance-event); azure: a Preempt
       event (action=terminate: Terminate) with NotBefore now+in (default 30)
  POST /_fixture/garbage?node=N&body=TEXT   the notice item answers TEXT
       (200) until cleared: a malformed answer
  POST /_fixture/clear?node=N               no notice, no garbage
  GET  /_fixture/state?node=N               JSON: requests (count of
       service requests), bad_headers (requests refused for a missing or
       wrong header), acks (Azure event ids acknowledged), notice (bool)
"""
import argparse
import datetime
import email.utils
import json
import secrets
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ARGS = None
COND = threading.Condition()
NODES = {}
TOKENS = {}

# The node's private IPv4 (the agent's address, controller/agent/address.h):
# aws GET /latest/meta-data/local-ipv4, gcp GET
# /computeMetadata/v1/instance/network-interfaces/0/ip, azure GET
# AZURE_ADDRESS_PATH?api-version=V&format=text; POST
# /_fixture/address?node=N&body=TEXT makes it answer TEXT instead.
PRIVATE_IPV4 = {"aws": "172.31.5.17", "gcp": "10.128.0.7", "azure": "10.0.0.4"}
AZURE_ADDRESS_PATH = "/metadata/instance/network/interface/0/ipv4/ipAddress/0/privateIpAddress"

NOT_FOUND_XHTML = (
    '<?xml version="1.0" encoding="iso-8859-1"?>\n'
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"\n'
    '\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n'
    ' <head>\n  <title>404 - Not Found</title>\n </head>\n'
    ' <body>\n  <h1>404 - Not Found</h1>\n </body>\n</html>\n')


def node_state(name):
    st = NODES.get(name)
    if st is None:
        st = {"requests": 0, "bad_headers": 0, "acks": [], "garbage": None,
              "action": None, "time": None, "rebalance": None,
              "preempted": False, "maintenance": False, "gen": 0,
              "events": [], "incarnation": 0, "address": PRIVATE_IPV4[ARGS.cloud]}
        NODES[name] = st
    return st


def iso(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, ctype="text/plain", extra=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def split(self):
        u = urlsplit(self.path)
        path, q = u.path, parse_qs(u.query)
        node = ""
        if path.startswith("/n/"):
            rest = path[3:]
            node, _, tail = rest.partition("/")
            path = "/" + tail
        return node, path, q

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    # ---- control --------------------------------------------------------
    def control(self, path, q):
        node = q.get("node", [""])[0]
        with COND:
            st = node_state(node)
            if path == "/_fixture/state":
                return self.reply(200, json.dumps({
                    "requests": st["requests"], "bad_headers": st["bad_headers"],
                    "acks": st["acks"],
                    "notice": bool(st["action"] or st["rebalance"] or st["preempted"]
                                   or st["maintenance"] or st["events"])}),
                    "application/json")
            if path == "/_fixture/clear":
                st.update(garbage=None, action=None, time=None, rebalance=None,
                          preempted=False, maintenance=False, events=[])
                st["gen"] += 1
                st["incarnation"] += 1
            elif path == "/_fixture/garbage":
                st["garbage"] = q.get("body", [""])[0]
                st["gen"] += 1
            elif path == "/_fixture/address":
                st["address"] = q.get("body", [""])[0]
            elif path == "/_fixture/interrupt":
                action = q.get("action", [""])[0]
                now = time.time()
                if ARGS.cloud == "aws":
                    if action == "rebalance":
                        st["rebalance"] = iso(now)
                    else:
                        st["action"] = action or "terminate"
                        st["time"] = iso(now + float(q.get("in", ["120"])[0]))
                elif ARGS.cloud == "gcp":
                    if action == "maintenance":
                        st["maintenance"] = True
                    else:
                        st["preempted"] = True
                else:
                    when = now + float(q.get("in", ["30"])[0])
                    st["events"].append({
                        "EventId": str(uuid.uuid4()).upper(),
                        "EventStatus": "Scheduled",
                        "EventType": "Terminate" if action == "terminate" else "Preempt",
                        "ResourceType": "VirtualMachine",
                        "Resources": ["tm-node-" + (node or "0")],
                        "NotBefore": email.utils.formatdate(when, usegmt=True),
                        "Description": "fixture eviction",
                        "EventSource": "Platform",
                        "DurationInSeconds": -1,
                    })
                    st["incarnation"] += 1
                st["gen"] += 1
            else:
                return self.reply(404, "no such control endpoint")
            COND.notify_all()
        return self.reply(200, "ok")

    # ---- aws ------------------------------------------------------------
    def aws_get(self, st, path):
        tok = self.headers.get("X-aws-ec2-metadata-token")
        if TOKENS.get(tok, 0) <= time.time():
            st["bad_headers"] += 1
            return self.reply(401, "")
        if path == "/latest/meta-data/local-ipv4":
            return self.reply(200, st["address"])
        if path == "/latest/meta-data/spot/instance-action":
            if st["garbage"] is not None:
                return self.reply(200, st["garbage"])
            if st["action"]:
                return self.reply(200, json.dumps({"action": st["action"], "time": st["time"]}))
            return self.reply(404, NOT_FOUND_XHTML, "text/html")
        if path == "/latest/meta-data/spot/termination-time" and st["time"]:
            return self.reply(200, st["time"])
        if path == "/latest/meta-data/events/recommendations/rebalance" and st["rebalance"]:
            return self.reply(200, json.dumps({"noticeTime": st["rebalance"]}))
        return self.reply(404, NOT_FOUND_XHTML, "text/html")

    # ---- gcp ------------------------------------------------------------
    def gcp_value(self, st, item):
        if st["garbage"] is not None and item == "preempted":
            return st["garbage"]
        if item == "preempted":
            return "TRUE" if st["preempted"] else "FALSE"
        return "TERMINATE_ON_HOST_MAINTENANCE" if st["maintenance"] else "NONE"

    def gcp_get(self, node, st, path, q):
        if self.headers.get("Metadata-Flavor") != "Google":
            st["bad_headers"] += 1
            return self.reply(403, "Missing Metadata-Flavor:Google header.")
        prefix = "/computeMetadata/v1/instance/"
        if path == prefix + "network-interfaces/0/ip":
            return self.reply(200, st["address"], "application/text", {"Metadata-Flavor": "Google"})
        item = path[len(prefix):] if path.startswith(prefix) else None
        if item not in ("preempted", "maintenance-event"):
            return self.reply(404, "not found")
        value = self.gcp_value(st, item)
        if q.get("wait_for_change", [""])[0] == "true":
            last = q.get("last_etag", [None])[0]
            timeout = float(q.get("timeout_sec", ["60"])[0])
            deadline = time.time() + timeout
            start_value = value
            while True:
                value = self.gcp_value(st, item)
                etag = "%016x" % (hash(value) & 0xffffffffffffffff)
                if (last is not None and last != etag) or (last is None and value != start_value):
                    break
                left = deadline - time.time()
                if left <= 0:
                    break
                COND.wait(left)
        etag = "%016x" % (hash(value) & 0xffffffffffffffff)
        return self.reply(200, value, "application/text",
                          {"ETag": etag, "Metadata-Flavor": "Google"})

    # ---- azure ----------------------------------------------------------
    def azure_check(self, st, path, q):
        if self.headers.get("Metadata") != "true":
            st["bad_headers"] += 1
            self.reply(400, json.dumps({"error": "Bad request. Required metadata header not specified"}),
                       "application/json")
            return False
        if path not in ("/metadata/scheduledevents", AZURE_ADDRESS_PATH):
            self.reply(404, "not found")
            return False
        if not q.get("api-version"):
            st["bad_headers"] += 1
            self.reply(400, json.dumps({"error": "Bad request. api-version was not specified"}),
                       "application/json")
            return False
        return True

    def azure_doc(self, st):
        if st["garbage"] is not None:
            return st["garbage"]
        return json.dumps({"DocumentIncarnation": st["incarnation"], "Events": st["events"]})

    # ---- dispatch -------------------------------------------------------
    def do_GET(self):
        node, path, q = self.split()
        if path.startswith("/_fixture/"):
            return self.control(path, q)
        with COND:
            st = node_state(node)
            st["requests"] += 1
            if ARGS.cloud == "aws":
                return self.aws_get(st, path)
            if ARGS.cloud == "gcp":
                return self.gcp_get(node, st, path, q)
            if self.azure_check(st, path, q):
                if path == AZURE_ADDRESS_PATH:
                    if q.get("format", [""])[0] != "text":
                        return self.reply(400, "format=text expected")
                    return self.reply(200, st["address"], "text/plain")
                return self.reply(200, self.azure_doc(st), "application/json")

    def do_PUT(self):
        node, path, q = self.split()
        self.body()
        with COND:
            st = node_state(node)
            st["requests"] += 1
            if ARGS.cloud != "aws" or path != "/latest/api/token":
                return self.reply(404, "not found")
            try:
                ttl = int(self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"))
            except (TypeError, ValueError):
                st["bad_headers"] += 1
                return self.reply(400, "missing or bad X-aws-ec2-metadata-token-ttl-seconds")
            if not 1 <= ttl <= 21600:
                st["bad_headers"] += 1
                return self.reply(400, "ttl out of range")
            token = "AQAE" + secrets.token_urlsafe(40)
            TOKENS[token] = time.time() + ttl
            return self.reply(200, token)

    def do_POST(self):
        node, path, q = self.split()
        if path.startswith("/_fixture/"):
            self.body()
            return self.control(path, q)
        raw = self.body()
        with COND:
            st = node_state(node)
            st["requests"] += 1
            if ARGS.cloud != "azure":
                return self.reply(404, "not found")
            if not self.azure_check(st, path, q):
                return
            try:
                doc = json.loads(raw)
                ids = [r["EventId"] for r in doc["StartRequests"]]
            except (ValueError, KeyError, TypeError):
                return self.reply(400, json.dumps({"error": "Bad request"}), "application/json")
            known = {e["EventId"] for e in st["events"]}
            for i in ids:
                if i in known:
                    st["acks"].append(i)
            st["events"] = [e for e in st["events"] if e["EventId"] not in ids]
            st["incarnation"] += 1
            COND.notify_all()
            return self.reply(200, "")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--cloud", required=True, choices=["aws", "gcp", "azure"])
    ap.add_argument("--port-file")
    ap.add_argument("--detach", action="store_true",
                    help="serve until killed, ignoring stdin")
    ARGS = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        import os
        os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    print("tm-metadata-fixture port=%d" % port, flush=True)
    if ARGS.detach:
        server.serve_forever()
        return
    threading.Thread(target=server.serve_forever, daemon=True).start()
    while sys.stdin.read(4096):
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
