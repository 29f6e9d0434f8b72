#!/usr/bin/env python3
"""tests/lib/gcp_fake.py: a loopback Compute Engine v1 and OAuth token endpoint.

Test code.  Python 3 stdlib, plus `cryptography` (on the image) to verify
RS256 signatures with the public half of the service-account key.

Every compute request is checked against the official discovery document
(../shared/specs/gcp-compute-v1/compute.v1.autoscaler-subset.json, with the
newer Scheduling schemas merged in):
  - the route (HTTP method + path template) exists;
  - every path parameter is present and matches its pattern, every query
    parameter is one the method or the API declares, integers are integers,
    enums are valid, required query parameters are there;
  - a method with a request body gets a JSON object whose every key is a
    property of its schema (recursively, through $ref, arrays and
    additionalProperties), with the right JSON type, valid enums, string
    patterns, and the fields the schema annotates as required for the
    method; a method without one gets no body;
  - the bearer token is one this fake issued and has not expired.
A request the real API would reject is answered 400 (401 for auth) AND
recorded as a violation: GET /__fake/state lists them, and the tests fail
when any is there (unless the test sent the bad request on purpose and
cleared them).

Simulated: long-running operations (RUNNING, DONE after --op-delay-ms),
requestId idempotency, per-zone capacity exhaustion
(ZONE_RESOURCE_POOL_EXHAUSTED, for spot or for all), quota
(QUOTA_EXCEEDED), preemption (a spot VM goes STOPPING, then is deleted with
a compute.instances.preempted operation), throttling (429) and 5xx, token
revocation, and a hold before/after each insert and bulkInsert (for kill -9
tests).
instances.bulkInsert is all or nothing as GCE's is with minCount: a zone
exhausted, over quota, or with fewer free slots ("capacity") than minCount
makes nothing and its operation ends DONE with ZONE_RESOURCE_POOL_EXHAUSTED
(or QUOTA_EXCEEDED).  setLabels / setMetadata check the fingerprint the way
the real API does (412 conditionNotMet when it is not the current one).

Control (no auth): POST /__fake/control with a JSON object, e.g.
  {"exhaust": {"us-central1-a": "spot"}, "quota": ["us-central1-b"],
   "throttle": 3, "fail5xx": 2, "preempt": ["us-central1-a/tm-1-abc"],
   "preempt_all_spot": true, "revoke_tokens": true, "hold_ms": [250, 250],
   "token_ttl": 3600, "clear_violations": true, "machine_types": {...},
   "capacity": {"us-central1-a": 1}, "resource_policies": ["tarmac-compact"],
   "bulk_make_fewer": 1, "refuse_set_labels": 1}
GET /__fake/state: instances, operations, counters, violations.

Run: gcp_fake.py --key KEYFILE [--audience URL] [--port 0]
Prints GCP_FAKE_PORT=N then GCP_FAKE_READY on stdout.
"""

import argparse
import base64
import json
import os
import re
import secrets
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

HERE = os.path.dirname(os.path.abspath(__file__))
SPECS = os.path.join(HERE, "..", "..", "..", "shared", "specs", "gcp-compute-v1")
REAL_TOKEN_URL = "https://oauth2.googleapis.com/token"
SCOPES_OK = ("https://www.googleapis.com/auth/compute",
             "https://www.googleapis.com/auth/cloud-platform")
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")

MACHINE_TYPES = {
    # name: (vcpus, memory_mb, accelerator, count)
    "a2-highgpu-1g": (12, 87040, "nvidia-tesla-a100", 1),
    "a2-highgpu-8g": (96, 696320, "nvidia-tesla-a100", 8),
    "a2-ultragpu-8g": (96, 1392640, "nvidia-a100-80gb", 8),
    "a3-highgpu-8g": (208, 1916928, "nvidia-h100-80gb", 8),
    "g2-standard-4": (4, 16384, "nvidia-l4", 1),
    "n1-standard-8": (8, 30720, None, 0),
}
ACCELERATORS = {"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p100", "nvidia-tesla-p4",
                "nvidia-tesla-a100", "nvidia-l4", "nvidia-h100-80gb", "nvidia-a100-80gb"}


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def rfc3339(t=None):
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03d-00:00" % int((t % 1) * 1000)


class Spec:
    """Routes and schemas from the discovery document."""

    def __init__(self):
        with open(os.path.join(SPECS, "compute.v1.autoscaler-subset.json")) as f:
            self.doc = json.load(f)
        newer = os.path.join(SPECS, "compute.v1.Scheduling.newer-revision.json")
        if os.path.exists(newer):
            with open(newer) as f:
                extra = json.load(f)
            for name, schema in (extra.get("schemas") or extra).items():
                if isinstance(schema, dict) and "properties" in schema:
                    self.doc["schemas"][name] = schema
        self.schemas = self.doc["schemas"]
        self.global_params = self.doc["parameters"]
        self.routes = []
        for rname, res in self.doc["resources"].items():
            for mname, m in res["methods"].items():
                tmpl = m.get("flatPath") or m["path"]
                names = re.findall(r"{([^}]+)}", tmpl)
                rx = "^/" + re.escape(self.doc["servicePath"]) + \
                    re.sub(r"\\{[^}]+\\}", "([^/]+)", re.escape(tmpl)) + "$"
                self.routes.append((m["httpMethod"], re.compile(rx), names, m, f"{rname}.{mname}"))

    def match(self, method, path):
        allowed = False
        for hm, rx, names, m, mid in self.routes:
            g = rx.match(path)
            if g:
                if hm == method:
                    return m, mid, dict(zip(names, [urllib.parse.unquote(x) for x in g.groups()]))
                allowed = True
        return None, "405" if allowed else "404", None

    def check_params(self, m, path_params, query):
        for name, p in m.get("parameters", {}).items():
            if p.get("location") == "path":
                v = path_params.get(name)
                if not v:
                    return f"missing path parameter {name}"
                if p.get("pattern") and not re.fullmatch(p["pattern"], v):
                    return f"path parameter {name}={v!r} does not match {p['pattern']}"
            elif p.get("required") and name not in query:
                return f"missing required query parameter {name}"
        for name, vals in query.items():
            p = m.get("parameters", {}).get(name) or self.global_params.get(name)
            if not p or p.get("location") == "path":
                return f"unknown query parameter {name!r}"
            for v in vals:
                if p.get("type") == "integer":
                    if not re.fullmatch(r"-?[0-9]+", v):
                        return f"query parameter {name}={v!r} is not an integer"
                    if "minimum" in p and int(v) < int(p["minimum"]):
                        return f"query parameter {name}={v} below {p['minimum']}"
                    if "maximum" in p and int(v) > int(p["maximum"]):
                        return f"query parameter {name}={v} above {p['maximum']}"
                if p.get("type") == "boolean" and v not in ("true", "false"):
                    return f"query parameter {name}={v!r} is not a boolean"
                if "enum" in p and v not in p["enum"]:
                    return f"query parameter {name}={v!r} not in {p['enum']}"
        return None

    def check_value(self, schema, v, where, method_id):
        if "$ref" in schema:
            schema = self.schemas[schema["$ref"]]
        t = schema.get("type")
        if t == "object":
            if not isinstance(v, dict):
                return f"{where}: expected an object"
            props = schema.get("properties")
            addl = schema.get("additionalProperties")
            for k, sub in v.items():
                if props is not None and k in props:
                    err = self.check_value(props[k], sub, f"{where}.{k}", method_id)
                elif addl is not None:
                    err = self.check_value(addl, sub, f"{where}[{k!r}]", method_id)
                else:
                    err = f"{where}: {k!r} is not a property of {schema.get('id', 'the schema')}"
                if err:
                    return err
            for k, sub in (props or {}).items():
                req = (sub.get("annotations") or {}).get("required") or []
                if method_id in req and k not in v:
                    return f"{where}: {k!r} is required for {method_id}"
            return None
        if t == "array":
            if not isinstance(v, list):
                return f"{where}: expected an array"
            for i, x in enumerate(v):
                err = self.check_value(schema.get("items", {}), x, f"{where}[{i}]", method_id)
                if err:
                    return err
            return None
        if t == "string":
            fmt = schema.get("format")
            if fmt in ("int64", "uint64") and isinstance(v, int) and not isinstance(v, bool):
                return None  # the JSON mapping accepts numbers for 64-bit ints
            if not isinstance(v, str):
                return f"{where}: expected a string"
            if fmt in ("int64", "uint64") and not re.fullmatch(r"-?[0-9]+", v):
                return f"{where}: {v!r} is not a {fmt}"
            if "enum" in schema and v not in schema["enum"]:
                return f"{where}: {v!r} not in {schema['enum']}"
            if schema.get("pattern") and not re.fullmatch(schema["pattern"], v):
                return f"{where}: {v!r} does not match {schema['pattern']}"
            return None
        if t == "integer":
            if isinstance(v, bool) or not isinstance(v, int):
                return f"{where}: expected an integer"
            return None
        if t == "number":
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return f"{where}: expected a number"
            return None
        if t == "boolean":
            if not isinstance(v, bool):
                return f"{where}: expected a boolean"
            return None
        return None


class State:
    def __init__(self, args):
        self.lock = threading.Condition()
        self.args = args
        with open(args.key) as f:
            key = json.load(f)
        self.email = key["client_email"]
        self.public_key = serialization.load_pem_private_key(
            key["private_key"].encode(), password=None).public_key()
        self.audience = args.audience
        self.project = args.project
        self.tokens = {}          # token -> expiry
        self.token_ttl = args.token_ttl
        self.instances = {}       # (zone, name) -> dict
        self.ops = {}             # (zone, name) -> dict
        self.request_ids = {}     # requestId -> (zone, op name)
        self.exhaust = {}         # zone -> "spot" | "all"
        self.capacity = {}        # zone -> free slots left (absent: unbounded)
        self.resource_policies = set()  # compact placement policies in the region
        self.created_in = {}      # zone -> instances ever created there
        self.bulk_make_fewer = 0  # next bulkInsert makes this many fewer (a cloud breaking minCount)
        self.refuse_set_labels = 0  # next N setLabels answered 400
        self.bulk_calls = []      # each bulkInsert: zone, count, minCount, names, policies, outcome
        self.tagged = {}          # "zone/name" -> labels and metadata its updates set (no secrets)
        self.quota = set()
        self.throttle = 0
        self.fail5xx = 0
        self.hold = (0, 0)
        self.violations = []
        self.counts = {"requests": 0, "inserts": 0, "instances_created": 0, "deletes": 0,
                       "tokens": 0, "throttled": 0, "failed5xx": 0, "exhausted": 0,
                       "preempted": 0, "auth_refused": 0, "request_id_replays": 0,
                       "bulk_inserts": 0, "bulk_instances": 0, "bulk_refused": 0,
                       "set_labels": 0, "set_metadata": 0, "fingerprint_refused": 0}
        self.mtypes = dict(MACHINE_TYPES)
        self.zones = set(args.zones.split(","))
        self.seq = 0

    def next_id(self):
        self.seq += 1
        return str(10 ** 15 + self.seq)

    def new_op(self, zone, op_type, target, error=None, delay=None):
        name = "operation-%d-%s" % (int(time.time() * 1000), secrets.token_hex(4))
        op = {"kind": "compute#operation", "id": self.next_id(), "name": name,
              "zone": self.zone_url(zone), "operationType": op_type, "targetLink": target,
              "status": "RUNNING", "progress": 0, "insertTime": rfc3339(),
              "startTime": rfc3339(), "selfLink": f"{self.zone_url(zone)}/operations/{name}",
              "_done_at": time.time() + (self.args.op_delay_ms if delay is None else delay) / 1000.0,
              "_error": error, "_zone": zone}
        self.ops[(zone, name)] = op
        return op

    def zone_url(self, zone):
        return f"https://www.googleapis.com/compute/v1/projects/{self.project}/zones/{zone}"

    def tick(self):
        """Move operations and instances along; called under the lock."""
        now = time.time()
        for op in self.ops.values():
            if op["status"] != "DONE" and now >= op["_done_at"]:
                op["status"] = "DONE"
                op["progress"] = 100
                op["endTime"] = rfc3339()
                if op["_error"]:
                    op["error"] = {"errors": [op["_error"]]}
                    op["httpErrorStatusCode"] = 503 if "EXHAUSTED" in op["_error"]["code"] else 403
                keys = [tuple(k) for k in op.get("_target_keys") or []]
                if op.get("_target_key"):
                    keys.append(tuple(op["_target_key"]))
                for key in keys:
                    inst = self.instances.get(key)
                    if inst is None:
                        continue
                    if op["operationType"] in ("insert", "bulkInsert") and not op["_error"]:
                        inst["status"] = "RUNNING"
                        inst["lastStartTimestamp"] = rfc3339()
                    elif op["operationType"] in ("delete", "compute.instances.preempted"):
                        del self.instances[key]
        for key, inst in list(self.instances.items()):
            if inst["status"] == "PROVISIONING" and now >= inst["_running_at"] - 0.05:
                inst["status"] = "STAGING"
        self.lock.notify_all()

    def state_json(self):
        self.tick()
        insts = []
        for (zone, name), i in sorted(self.instances.items()):
            insts.append({"zone": zone, "name": name, "status": i["status"],
                          "machineType": i["machineType"].rsplit("/", 1)[-1],
                          "labels": i.get("labels", {}),
                          "provisioningModel": i.get("scheduling", {}).get("provisioningModel", "STANDARD"),
                          "instanceTerminationAction": i.get("scheduling", {}).get("instanceTerminationAction"),
                          "metadata_keys": [m["key"] for m in i.get("metadata", {}).get("items", [])],
                          "metadata": {m["key"]: m.get("value", "") for m in i.get("metadata", {}).get("items", [])
                                       if m["key"] not in ("startup-script", "tarmac-bootstrap")},
                          "bootstrap_len": sum(len(m.get("value", "")) for m in i.get("metadata", {}).get("items", []) if m["key"] == "tarmac-bootstrap"),
                          "resourcePolicies": i.get("resourcePolicies", []),
                          "startup_script_len": sum(len(m.get("value", "")) for m in i.get("metadata", {}).get("items", []) if m["key"] == "startup-script"),
                          "guestAccelerators": i.get("guestAccelerators", [])})
        return {"instances": insts, "counts": self.counts, "violations": self.violations,
                "operations": len(self.ops), "created_in": self.created_in,
                "bulk_calls": self.bulk_calls, "tagged": self.tagged}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gcp-fake"

    def log_message(self, fmt, *a):
        if self.server.args.verbose:
            sys.stderr.write("gcp-fake: " + (fmt % a) + "\n")

    # ---- plumbing --------------------------------------------------------
    def reply(self, code, obj, headers=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def gerror(self, code, reason, message, status=None):
        self.reply(code, {"error": {"code": code, "message": message, "status": status or "",
                                    "errors": [{"domain": "global", "reason": reason,
                                                "message": message}]}})

    def violation(self, why, code=400):
        st = self.server.state
        with st.lock:
            st.violations.append(f"{self.command} {self.path}: {why}")
        sys.stderr.write(f"gcp-fake: VIOLATION {self.command} {self.path.split('?')[0]}: {why}\n")
        if code == 401:
            self.gerror(401, "authError", "Request had invalid authentication credentials.",
                        "UNAUTHENTICATED")
        else:
            self.gerror(code, "invalid", f"Invalid request: {why}", "INVALID_ARGUMENT")

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def do_DELETE(self):
        self.route()

    def do_PUT(self):
        self.route()

    def do_PATCH(self):
        self.route()

    def route(self):
        st = self.server.state
        url = urllib.parse.urlsplit(self.path)
        raw = self.read_body()
        try:
            if url.path == "/__fake/state":
                with st.lock:
                    return self.reply(200, st.state_json())
            if url.path == "/__fake/control":
                return self.control(json.loads(raw or b"{}"))
            if url.path == "/token":
                return self.token(raw)
            if url.path == "/computeMetadata/v1/instance/service-accounts/default/token":
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self.reply(403, {"error": "Metadata-Flavor header missing"})
                return self.issue()
            return self.compute(url, raw)
        except BrokenPipeError:
            return None

    # ---- control ---------------------------------------------------------
    def control(self, c):
        st = self.server.state
        with st.lock:
            if "exhaust" in c:
                st.exhaust = {z: v for z, v in c["exhaust"].items() if v}
            if "quota" in c:
                st.quota = set(c["quota"])
            if "capacity" in c:
                st.capacity = {z: int(v) for z, v in c["capacity"].items() if v is not None}
            if "resource_policies" in c:
                st.resource_policies = set(c["resource_policies"])
            st.bulk_make_fewer = c.get("bulk_make_fewer", st.bulk_make_fewer)
            st.refuse_set_labels = c.get("refuse_set_labels", st.refuse_set_labels)
            st.throttle = c.get("throttle", st.throttle)
            st.fail5xx = c.get("fail5xx", st.fail5xx)
            if "hold_ms" in c:
                st.hold = tuple(x / 1000.0 for x in c["hold_ms"])
            st.token_ttl = c.get("token_ttl", st.token_ttl)
            if c.get("revoke_tokens"):
                st.tokens.clear()
            if c.get("clear_violations"):
                st.violations.clear()
            targets = list(c.get("preempt", []))
            if c.get("preempt_all_spot"):
                targets += [f"{z}/{n}" for (z, n), i in st.instances.items()
                            if i.get("scheduling", {}).get("provisioningModel") == "SPOT"
                            and i["status"] == "RUNNING"]
            done = []
            for t in targets:
                zone, name = t.split("/", 1)
                inst = st.instances.get((zone, name))
                if not inst or inst["status"] not in ("RUNNING", "STAGING", "PROVISIONING"):
                    continue
                inst["status"] = "STOPPING"
                op = st.new_op(zone, "compute.instances.preempted", inst["selfLink"],
                               delay=c.get("preempt_delay_ms", 300))
                op["_target_key"] = (zone, name)
                op["targetId"] = inst["id"]
                op["user"] = "system"
                st.counts["preempted"] += 1
                done.append(t)
            return self.reply(200, {"ok": True, "preempted": done})

    # ---- OAuth -----------------------------------------------------------
    def issue(self):
        st = self.server.state
        tok = "ya29.fake-" + secrets.token_urlsafe(24)
        with st.lock:
            st.tokens[tok] = time.time() + st.token_ttl
            st.counts["tokens"] += 1
            ttl = st.token_ttl
            if st.args.token_log:
                with open(st.args.token_log, "a") as f:
                    f.write(tok + "\n")
        return self.reply(200, {"access_token": tok, "expires_in": ttl, "token_type": "Bearer"})

    def token(self, raw):
        st = self.server.state
        if self.command != "POST":
            return self.reply(405, {"error": "invalid_request"})
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if ctype != "application/x-www-form-urlencoded":
            return self.token_refuse(f"content type {ctype!r}", violation=True)
        form = urllib.parse.parse_qs(raw.decode(), keep_blank_values=True)
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return self.token_refuse(f"grant_type {form.get('grant_type')}", violation=True)
        jwt = (form.get("assertion") or [""])[0]
        if st.args.token_log and jwt:
            with open(st.args.token_log, "a") as f:
                f.write(jwt + "\n")
        parts = jwt.split(".")
        if len(parts) != 3:
            return self.token_refuse("assertion is not a JWS")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except Exception:
            return self.token_refuse("assertion does not decode")
        if header.get("alg") != "RS256" or set(header) - {"alg", "typ", "kid"}:
            return self.token_refuse(f"header {header}")
        try:
            st.public_key.verify(sig, (parts[0] + "." + parts[1]).encode(), padding.PKCS1v15(),
                                 hashes.SHA256())
        except Exception:
            return self.token_refuse("invalid JWT signature")
        now = time.time()
        if claims.get("iss") != st.email:
            return self.token_refuse("iss is not the key's client_email")
        if claims.get("aud") != st.audience:
            return self.token_refuse(f"aud {claims.get('aud')!r} is not {st.audience!r}")
        scopes = str(claims.get("scope", "")).split()
        if not any(s in SCOPES_OK for s in scopes):
            return self.token_refuse(f"scope {scopes} gives no compute access")
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int) or exp - iat > 3600 or \
                exp <= now or iat > now + 300:
            return self.token_refuse("iat/exp out of range")
        return self.issue()

    def token_refuse(self, why, violation=False):
        st = self.server.state
        with st.lock:
            st.counts["auth_refused"] += 1
            if violation:
                st.violations.append(f"POST /token: {why}")
        sys.stderr.write(f"gcp-fake: token refused: {why}\n")
        return self.reply(400, {"error": "invalid_grant", "error_description": "Invalid JWT: " + why})

    # ---- compute ---------------------------------------------------------
    def compute(self, url, raw):
        st = self.server.state
        spec = self.server.spec
        m, mid, pp = spec.match(self.command, url.path)
        if m is None:
            return self.violation(f"no such route ({mid})", 404)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        err = spec.check_params(m, pp, query)
        if err:
            return self.violation(err)
        authz = self.headers.get("Authorization") or ""
        tok = authz[7:] if authz.startswith("Bearer ") else None
        with st.lock:
            st.counts["requests"] += 1
            ok = tok is not None and st.tokens.get(tok, 0) > time.time()
            if not ok:
                st.counts["auth_refused"] += 1
        if not ok:
            return self.gerror(401, "authError", "Request had invalid authentication credentials. "
                               "Expected OAuth 2 access token.", "UNAUTHENTICATED")
        body = None
        if "request" in m:
            if not raw:
                return self.violation("missing request body")
            if (self.headers.get("Content-Type") or "").split(";")[0] != "application/json":
                return self.violation("body is not application/json")
            try:
                body = json.loads(raw)
            except ValueError:
                return self.violation("body is not JSON")
            err = spec.check_value(m["request"], body, m["request"]["$ref"], "compute." + mid)
            if err:
                return self.violation(err)
        elif raw:
            return self.violation("this method takes no request body")
        if pp.get("project") != st.project:
            return self.gerror(403, "forbidden", f"Project {pp.get('project')} not found or "
                               "permission denied", "PERMISSION_DENIED")
        with st.lock:
            if st.throttle > 0:
                st.throttle -= 1
                st.counts["throttled"] += 1
                throttled = True
            else:
                throttled = False
            if not throttled and st.fail5xx > 0:
                st.fail5xx -= 1
                st.counts["failed5xx"] += 1
                failed = True
            else:
                failed = False
        if throttled:
            return self.gerror(429, "rateLimitExceeded", "Rate Limit Exceeded", "RESOURCE_EXHAUSTED")
        if failed:
            return self.gerror(503, "backendError", "Backend Error", "UNAVAILABLE")
        zone = pp.get("zone")
        if zone is not None and zone not in st.zones:
            return self.gerror(404, "notFound", f"The resource 'projects/{st.project}/zones/{zone}' "
                               "was not found", "NOT_FOUND")
        handler = getattr(self, "m_" + mid.replace(".", "_"), None)
        if handler is None:
            return self.violation(f"{mid} is valid but not simulated by this fake", 501)
        return handler(pp, query, body)

    def m_zones_get(self, pp, q, body):
        st = self.server.state
        return self.reply(200, {"kind": "compute#zone", "name": pp["zone"], "status": "UP",
                                "region": f"https://www.googleapis.com/compute/v1/projects/{st.project}/regions/{pp['zone'].rsplit('-', 1)[0]}",
                                "selfLink": st.zone_url(pp["zone"])})

    def m_machineTypes_get(self, pp, q, body):
        st = self.server.state
        mt = st.mtypes.get(pp["machineType"])
        if not mt:
            return self.gerror(404, "notFound", f"The resource 'projects/{st.project}/zones/"
                               f"{pp['zone']}/machineTypes/{pp['machineType']}' was not found",
                               "NOT_FOUND")
        out = {"kind": "compute#machineType", "name": pp["machineType"], "guestCpus": mt[0],
               "memoryMb": mt[1], "zone": pp["zone"]}
        if mt[2]:
            out["accelerators"] = [{"guestAcceleratorType": mt[2], "guestAcceleratorCount": mt[3]}]
        return self.reply(200, out)

    def m_instances_insert(self, pp, q, body):
        st = self.server.state
        zone = pp["zone"]
        rid = (q.get("requestId") or [None])[0]
        if rid is not None:
            try:
                u = uuid.UUID(rid)
                if str(u) != rid.lower() or u.int == 0:
                    raise ValueError
            except ValueError:
                return self.violation(f"requestId {rid!r} is not a UUID")
        why = self.semantic_insert(zone, body)
        if why:
            return self.violation(why)
        if st.hold[0]:
            time.sleep(st.hold[0])
        with st.lock:
            st.counts["inserts"] += 1
            if rid and rid in st.request_ids:
                st.counts["request_id_replays"] += 1
                op = st.ops[st.request_ids[rid]]
                st.tick()
                return self.reply(200, public(op))
            name = body["name"]
            if (zone, name) in st.instances:
                return self.gerror(409, "alreadyExists", f"The resource 'projects/{st.project}/"
                                   f"zones/{zone}/instances/{name}' already exists",
                                   "ALREADY_EXISTS")
            spot = body.get("scheduling", {}).get("provisioningModel") == "SPOT"
            link = f"{st.zone_url(zone)}/instances/{name}"
            ex = st.exhaust.get(zone)
            if ex == "all" or (ex == "spot" and spot) or st.capacity.get(zone, 1) < 1:
                st.counts["exhausted"] += 1
                code = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" if spot else \
                    "ZONE_RESOURCE_POOL_EXHAUSTED"
                op = st.new_op(zone, "insert", link, error={
                    "code": code, "message": f"The zone '{st.zone_url(zone)}' does not have "
                    "enough resources available to fulfill the request. Try a different zone, "
                    "or try again later."})
            elif zone in st.quota:
                op = st.new_op(zone, "insert", link, error={
                    "code": "QUOTA_EXCEEDED",
                    "message": "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region."})
            else:
                inst = dict(body)
                inst.update({"kind": "compute#instance", "id": st.next_id(), "zone": st.zone_url(zone),
                             "status": "PROVISIONING", "creationTimestamp": rfc3339(),
                             "selfLink": link, "_running_at": time.time() + st.args.op_delay_ms / 1000.0})
                inst["machineType"] = f"{st.zone_url(zone)}/machineTypes/{body['machineType'].rsplit('/', 1)[-1]}"
                fingerprints(inst)
                st.instances[(zone, name)] = inst
                st.counts["instances_created"] += 1
                st.created_in[zone] = st.created_in.get(zone, 0) + 1
                if zone in st.capacity:
                    st.capacity[zone] -= 1
                op = st.new_op(zone, "insert", link)
                op["_target_key"] = (zone, name)
                op["targetId"] = inst["id"]
            if rid:
                st.request_ids[rid] = (zone, op["name"])
            out = public(op)
        if st.hold[1]:
            time.sleep(st.hold[1])
        return self.reply(200, out)

    def semantic_insert(self, zone, body):
        """What the real API refuses beyond the schema."""
        name = body.get("name", "")
        if not NAME.match(name):
            return f"instance name {name!r} is not a valid resource name"
        return self.semantic_props(zone, body, False)

    def semantic_props(self, zone, body, bulk):
        """An Instance's (insert) or InstanceProperties' (bulkInsert) fields."""
        st = self.server.state
        mt = body.get("machineType", "")
        mname = mt.rsplit("/", 1)[-1]
        if bulk and "/" in mt:
            return f"instanceProperties.machineType {mt!r}: InstanceProperties takes a machine type name"
        if mt not in (mname, f"zones/{zone}/machineTypes/{mname}") and \
                not mt.endswith(f"/zones/{zone}/machineTypes/{mname}"):
            return f"machineType {mt!r} is not in zone {zone}"
        if mname not in st.mtypes:
            return f"Invalid value for field 'resource.machineType': {mt!r}: unknown machine type"
        labels = body.get("labels", {})
        if len(labels) > 64:
            return "more than 64 labels"
        for k, v in labels.items():
            if not LABEL_KEY.match(k):
                return f"label key {k!r} is invalid"
            if not LABEL_VALUE.match(v):
                return f"label value {v!r} of {k!r} is invalid"
        items = body.get("metadata", {}).get("items", [])
        if sum(len(i.get("key", "")) + len(i.get("value", "")) for i in items) > 512 * 1024:
            return "metadata larger than 512 KB"
        if len({i["key"] for i in items}) != len(items):
            return "duplicate metadata keys"
        disks = body.get("disks", [])
        if sum(1 for d in disks if d.get("boot")) != 1:
            return "exactly one boot disk is required"
        for d in disks:
            if d.get("boot") and not d.get("initializeParams", {}).get("sourceImage") and not d.get("source"):
                return "boot disk needs initializeParams.sourceImage or source"
        if not body.get("networkInterfaces"):
            return "at least one network interface is required"
        sch = body.get("scheduling", {})
        accel = body.get("guestAccelerators", [])
        has_gpu = bool(accel) or bool(st.mtypes[mname][2])
        if sch.get("provisioningModel") == "SPOT":
            if sch.get("automaticRestart") is True:
                return "a SPOT instance cannot have automaticRestart true"
            if sch.get("onHostMaintenance") == "MIGRATE":
                return "a SPOT instance cannot MIGRATE on host maintenance"
            if not sch.get("instanceTerminationAction"):
                return "fake policy: spot without instanceTerminationAction (tarmac always sets it)"
        elif sch.get("instanceTerminationAction"):
            return "instanceTerminationAction is only valid for SPOT instances"
        if has_gpu and sch.get("onHostMaintenance", "MIGRATE") != "TERMINATE":
            return "instances with GPUs must set scheduling.onHostMaintenance TERMINATE"
        if st.mtypes[mname][2] and accel:
            return f"{mname} comes with its GPUs: guestAccelerators must not be set"
        for a in accel:
            at = a.get("acceleratorType", "").rsplit("/", 1)[-1]
            if at not in ACCELERATORS:
                return f"unknown accelerator type {a.get('acceleratorType')!r}"
            if not a.get("acceleratorCount"):
                return "acceleratorCount missing"
        for rp in body.get("resourcePolicies", []):
            if bulk and "/" in rp:
                return f"resourcePolicies {rp!r}: InstanceProperties takes names, not URLs"
        return None

    def check_request_id(self, q):
        rid = (q.get("requestId") or [None])[0]
        if rid is not None:
            try:
                u = uuid.UUID(rid)
                if str(u) != rid.lower() or u.int == 0:
                    raise ValueError
            except ValueError:
                return rid, f"requestId {rid!r} is not a UUID"
        return rid, None

    def m_instances_bulkInsert(self, pp, q, body):
        st = self.server.state
        zone = pp["zone"]
        rid, why = self.check_request_id(q)
        if why:
            return self.violation(why)
        why = self.semantic_bulk(zone, body)
        if why:
            return self.violation(why)
        props = body["instanceProperties"]
        names = sorted(body["perInstanceProperties"])
        count = int(body["count"])
        min_count = int(body.get("minCount", count))
        if st.hold[0]:
            time.sleep(st.hold[0])
        with st.lock:
            st.counts["bulk_inserts"] += 1
            if rid and rid in st.request_ids:
                st.counts["request_id_replays"] += 1
                op = st.ops[st.request_ids[rid]]
                st.tick()
                return self.reply(200, public(op))
            for rp in props.get("resourcePolicies", []):
                if rp not in st.resource_policies:
                    return self.gerror(400, "invalid", "Invalid value for field 'resource."
                                       f"instanceProperties.resourcePolicies[0]': '{rp}'. The "
                                       "referenced resource policy does not exist.", "INVALID_ARGUMENT")
            for n in names:
                if (zone, n) in st.instances:
                    return self.gerror(409, "alreadyExists", f"The resource 'projects/{st.project}/"
                                       f"zones/{zone}/instances/{n}' already exists", "ALREADY_EXISTS")
            spot = props.get("scheduling", {}).get("provisioningModel") == "SPOT"
            link = f"{st.zone_url(zone)}/instances"
            ex = st.exhaust.get(zone)
            free = st.capacity.get(zone, len(names))
            if ex == "all" or (ex == "spot" and spot) or free < min_count:
                # minCount not reachable: nothing is made (GCE deletes what
                # it made before it ends the operation).
                st.counts["exhausted"] += 1
                st.counts["bulk_refused"] += 1
                code = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS" if spot else \
                    "ZONE_RESOURCE_POOL_EXHAUSTED"
                op = st.new_op(zone, "bulkInsert", link, error={
                    "code": code, "message": f"The zone '{st.zone_url(zone)}' does not have "
                    f"enough resources available to fulfill the request ({min_count} wanted, "
                    f"{max(free, 0) if ex is None else 0} free)."})
            elif zone in st.quota:
                st.counts["bulk_refused"] += 1
                op = st.new_op(zone, "bulkInsert", link, error={
                    "code": "QUOTA_EXCEEDED",
                    "message": "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region."})
            else:
                op = st.new_op(zone, "bulkInsert", link)
                op["_target_keys"] = []
                fewer, st.bulk_make_fewer = st.bulk_make_fewer, 0
                for n in names[:max(0, min(count, free) - fewer)]:
                    inst = json.loads(json.dumps(props))
                    inst.update({"kind": "compute#instance", "id": st.next_id(), "name": n,
                                 "zone": st.zone_url(zone), "status": "PROVISIONING",
                                 "creationTimestamp": rfc3339(),
                                 "selfLink": f"{link}/{n}",
                                 "_running_at": time.time() + st.args.op_delay_ms / 1000.0})
                    inst["machineType"] = f"{st.zone_url(zone)}/machineTypes/{props['machineType']}"
                    inst["guestAccelerators"] = [
                        dict(a, acceleratorType=f"{st.zone_url(zone)}/acceleratorTypes/"
                             f"{a['acceleratorType'].rsplit('/', 1)[-1]}")
                        for a in props.get("guestAccelerators", [])]
                    if not inst["guestAccelerators"]:
                        del inst["guestAccelerators"]
                    fingerprints(inst)
                    st.instances[(zone, n)] = inst
                    st.counts["instances_created"] += 1
                    st.counts["bulk_instances"] += 1
                    st.created_in[zone] = st.created_in.get(zone, 0) + 1
                    if zone in st.capacity:
                        st.capacity[zone] -= 1
                    op["_target_keys"].append((zone, n))
            if rid:
                st.request_ids[rid] = (zone, op["name"])
            st.bulk_calls.append({"zone": zone, "count": count, "minCount": min_count,
                                  "names": names, "resourcePolicies": props.get("resourcePolicies", []),
                                  "labels": props.get("labels", {}),
                                  "error": (op["_error"] or {}).get("code")})
            out = public(op)
        if st.hold[1]:
            time.sleep(st.hold[1])
        return self.reply(200, out)

    def semantic_bulk(self, zone, body):
        if body.get("sourceInstanceTemplate"):
            return "fake policy: sourceInstanceTemplate is not simulated (tarmac sends instanceProperties)"
        props = body.get("instanceProperties")
        if not isinstance(props, dict):
            return "instanceProperties is required without sourceInstanceTemplate"
        per = body.get("perInstanceProperties") or {}
        if not per and not body.get("namePattern"):
            return "either namePattern or perInstanceProperties must be set"
        if body.get("namePattern"):
            return "fake policy: namePattern is not simulated (tarmac names each instance)"
        if "count" not in body:
            return "count is required"
        count = int(body["count"])
        min_count = int(body.get("minCount", count))
        if count < 1 or min_count < 1 or min_count > count:
            return f"count {count} / minCount {min_count} out of range"
        if len(per) != count:
            return f"perInstanceProperties names {len(per)} instances, count is {count}"
        for n, v in per.items():
            if not NAME.match(n):
                return f"perInstanceProperties key {n!r} is not a valid instance name"
            if v.get("name") not in (None, n):
                return f"perInstanceProperties[{n!r}].name is {v.get('name')!r}"
        return self.semantic_props(zone, props, True)

    def check_labels(self, labels):
        if len(labels) > 64:
            return "more than 64 labels"
        for k, v in labels.items():
            if not LABEL_KEY.match(k):
                return f"label key {k!r} is invalid"
            if not LABEL_VALUE.match(v):
                return f"label value {v!r} of {k!r} is invalid"
        return None

    def instance_update(self, pp, q, body, kind):
        """setLabels / setMetadata: the fingerprint must be the current one."""
        st = self.server.state
        rid, why = self.check_request_id(q)
        if why:
            return self.violation(why)
        if kind == "setLabels":
            why = self.check_labels(body.get("labels", {}))
            sent = body.get("labelFingerprint")
        else:
            items = body.get("items", [])
            why = None
            if sum(len(i.get("key", "")) + len(i.get("value", "")) for i in items) > 512 * 1024:
                why = "metadata larger than 512 KB"
            elif len({i.get("key") for i in items}) != len(items):
                why = "duplicate metadata keys"
            elif any("value" not in i or "key" not in i for i in items):
                why = "a metadata item without key or value"
            sent = body.get("fingerprint")
        if why:
            return self.violation(why)
        key = (pp["zone"], pp["instance"])
        with st.lock:
            st.tick()
            if rid and rid in st.request_ids:
                st.counts["request_id_replays"] += 1
                return self.reply(200, public(st.ops[st.request_ids[rid]]))
            inst = st.instances.get(key)
            if not inst:
                return self.gerror(404, "notFound", f"The resource 'projects/{st.project}/zones/"
                                   f"{key[0]}/instances/{key[1]}' was not found", "NOT_FOUND")
            if kind == "setLabels" and st.refuse_set_labels > 0:
                st.refuse_set_labels -= 1
                return self.gerror(400, "invalid", "Invalid value for field 'labels' (fault "
                                   "injected by the test)", "INVALID_ARGUMENT")
            have = inst["labelFingerprint"] if kind == "setLabels" else inst["metadata"]["fingerprint"]
            if sent != have:
                st.counts["fingerprint_refused"] += 1
                what = "Labels" if kind == "setLabels" else "Metadata"
                return self.gerror(412, "conditionNotMet", f"Supplied fingerprint does not match "
                                   f"current {what.lower()} fingerprint.", "FAILED_PRECONDITION")
            rec = st.tagged.setdefault(f"{key[0]}/{key[1]}", {})
            if kind == "setLabels":
                st.counts["set_labels"] += 1
                inst["labels"] = dict(body.get("labels", {}))
                inst["labelFingerprint"] = new_fingerprint()
                rec["labels"] = inst["labels"]
            else:
                st.counts["set_metadata"] += 1
                boot = [i["value"] for i in body.get("items", []) if i.get("key") == "tarmac-bootstrap"]
                rec["metadata"] = {i["key"]: i["value"] for i in body.get("items", [])
                                   if i.get("key") not in ("startup-script", "tarmac-bootstrap")}
                # the head of the node's bootstrap only: its secret stays out
                rec["bootstrap_head"] = "\n".join(boot[0].splitlines()[:2]) if boot else None
                inst["metadata"] = {"kind": "compute#metadata", "items": list(body.get("items", [])),
                                    "fingerprint": new_fingerprint()}
            op = st.new_op(key[0], kind, inst["selfLink"])
            op["targetId"] = inst["id"]
            if rid:
                st.request_ids[rid] = (key[0], op["name"])
            return self.reply(200, public(op))

    def m_instances_setLabels(self, pp, q, body):
        return self.instance_update(pp, q, body, "setLabels")

    def m_instances_setMetadata(self, pp, q, body):
        return self.instance_update(pp, q, body, "setMetadata")

    def m_instances_delete(self, pp, q, body):
        st = self.server.state
        key = (pp["zone"], pp["instance"])
        with st.lock:
            st.tick()
            inst = st.instances.get(key)
            if not inst:
                return self.gerror(404, "notFound", f"The resource 'projects/{st.project}/zones/"
                                   f"{key[0]}/instances/{key[1]}' was not found", "NOT_FOUND")
            st.counts["deletes"] += 1
            inst["status"] = "STOPPING"
            op = st.new_op(key[0], "delete", inst["selfLink"])
            op["_target_key"] = key
            op["targetId"] = inst["id"]
            return self.reply(200, public(op))

    def m_instances_get(self, pp, q, body):
        st = self.server.state
        with st.lock:
            st.tick()
            inst = st.instances.get((pp["zone"], pp["instance"]))
            if not inst:
                return self.gerror(404, "notFound", "not found", "NOT_FOUND")
            return self.reply(200, public(inst))

    def m_instances_aggregatedList(self, pp, q, body):
        st = self.server.state
        flt = (q.get("filter") or [""])[0]
        try:
            terms = parse_filter(flt)
        except ValueError as e:
            return self.violation(f"filter {flt!r}: {e}")
        mr = int((q.get("maxResults") or ["500"])[0])
        start = decode_page(q)
        if start is None:
            return self.violation("pageToken is not one this fake issued")
        with st.lock:
            st.tick()
            hits = [(z, n, i) for (z, n), i in sorted(st.instances.items())
                    if all(get_path(i, k) == v for k, v in terms)]
        page = hits[start:start + (mr or 500)]
        items = {f"zones/{z}": {"warning": {"code": "NO_RESULTS_ON_PAGE",
                                            "message": "There are no results for scope"}}
                 for z in sorted(st.zones)}
        for z, n, i in page:
            items[f"zones/{z}"] = items[f"zones/{z}"] if "instances" in items[f"zones/{z}"] else {"instances": []}
            items[f"zones/{z}"]["instances"].append(public(i))
        out = {"kind": "compute#instanceAggregatedList", "id": f"projects/{st.project}/aggregated/instances",
               "items": items}
        if start + len(page) < len(hits):
            out["nextPageToken"] = encode_page(start + len(page))
        return self.reply(200, out)

    def m_instances_list(self, pp, q, body):
        st = self.server.state
        with st.lock:
            st.tick()
            items = [public(i) for (z, n), i in sorted(st.instances.items()) if z == pp["zone"]]
        return self.reply(200, {"kind": "compute#instanceList", "items": items})

    def op_lookup(self, pp):
        st = self.server.state
        return st.ops.get((pp["zone"], pp["operation"]))

    def m_zoneOperations_get(self, pp, q, body):
        st = self.server.state
        with st.lock:
            st.tick()
            op = self.op_lookup(pp)
            if not op:
                return self.gerror(404, "notFound", "operation not found", "NOT_FOUND")
            return self.reply(200, public(op))

    def m_zoneOperations_wait(self, pp, q, body):
        st = self.server.state
        deadline = time.time() + 2.0
        with st.lock:
            while True:
                st.tick()
                op = self.op_lookup(pp)
                if not op:
                    return self.gerror(404, "notFound", "operation not found", "NOT_FOUND")
                if op["status"] == "DONE" or time.time() >= deadline:
                    return self.reply(200, public(op))
                st.lock.wait(min(0.05, max(0.0, op["_done_at"] - time.time())) or 0.01)

    def m_zoneOperations_list(self, pp, q, body):
        st = self.server.state
        flt = (q.get("filter") or [""])[0]
        try:
            terms = parse_filter(flt)
        except ValueError as e:
            return self.violation(f"filter {flt!r}: {e}")
        start = decode_page(q)
        if start is None:
            return self.violation("pageToken is not one this fake issued")
        mr = int((q.get("maxResults") or ["500"])[0]) or 500
        with st.lock:
            st.tick()
            hits = [public(o) for (z, n), o in sorted(st.ops.items())
                    if z == pp["zone"] and all(get_path(o, k) == v for k, v in terms)]
        out = {"kind": "compute#operationList", "items": hits[start:start + mr]}
        if start + mr < len(hits):
            out["nextPageToken"] = encode_page(start + mr)
        return self.reply(200, out)


def new_fingerprint():
    return base64.b64encode(secrets.token_bytes(8)).decode()


def fingerprints(inst):
    """What GCE adds to a new instance: the label and metadata fingerprints."""
    inst["labelFingerprint"] = new_fingerprint()
    md = dict(inst.get("metadata") or {})
    md.update({"kind": "compute#metadata", "fingerprint": new_fingerprint()})
    md.setdefault("items", [])
    inst["metadata"] = md


def public(obj):
    return {k: v for k, v in obj.items() if not k.startswith("_")}


def get_path(obj, path):
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


FILTER_TERM = re.compile(r'^\(?\s*([A-Za-z][A-Za-z0-9_.-]*)\s*=\s*"([^"]*)"\s*\)?$')


def parse_filter(flt):
    """`a.b = "v"` terms, optionally parenthesised, joined by AND."""
    if not flt.strip():
        return []
    out = []
    for term in re.split(r"\s+AND\s+", flt.strip()):
        m = FILTER_TERM.match(term.strip())
        if not m:
            raise ValueError(f"cannot read term {term!r}")
        out.append((m.group(1), m.group(2)))
    return out


def encode_page(n):
    return base64.urlsafe_b64encode(json.dumps({"o": n}).encode()).decode().rstrip("=")


def decode_page(q):
    tok = (q.get("pageToken") or [None])[0]
    if tok is None:
        return 0
    try:
        return int(json.loads(b64url_decode(tok))["o"])
    except Exception:
        return None


def make_key(path, email, project):
    """Write a throwaway service-account key file (test setup)."""
    from cryptography.hazmat.primitives.asymmetric import rsa
    k = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption()).decode()
    doc = {"type": "service_account", "project_id": project, "private_key_id": secrets.token_hex(20),
           "private_key": pem, "client_email": email, "client_id": "1" + "0" * 20,
           "auth_uri": "https://accounts.google.com/o/oauth2/auth",
           "token_uri": REAL_TOKEN_URL}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=2)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "make-key":
        make_key(*sys.argv[2:5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", required=True, help="service-account key file (its public half verifies JWTs)")
    ap.add_argument("--audience", default=REAL_TOKEN_URL)
    ap.add_argument("--project", default="tarmac-test")
    ap.add_argument("--zones", default="us-central1-a,us-central1-b,us-central1-c,us-central1-f")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--op-delay-ms", type=float, default=100)
    ap.add_argument("--token-ttl", type=int, default=3600)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--token-log", help="append every token issued and JWT received (secret grep)")
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.args = args
    srv.spec = Spec()
    srv.state = State(args)
    print(f"GCP_FAKE_PORT={srv.server_address[1]}", flush=True)
    print("GCP_FAKE_READY", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
