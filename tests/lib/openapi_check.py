#!/usr/bin/env python3
"""Check a running tarmac API against docs/openapi.yaml.

    openapi_check.py --spec docs/openapi.yaml --base http://127.0.0.1:PORT \
        --fixture fixture.json --routes routes.txt

fixture.json: {"tokens": {"admin": ..., "finance": ..., "engineer": ...,
"viewer": ..., "engineer_other": ..., "revoked": ...}, "team": "<engineer's
team>", "other_team": ..., "node_id": N, "pool": "name"}.
routes.txt: "METHOD PATTERN" per line, the server's own route table.

Checks: the file and the server serve the same operations; for every
operation, 401 without a token, with a malformed one and with a revoked
one; exactly the roles in x-tarmac-roles get 2xx, every other role 403; an
engineer of another team gets 403 submitting for a team and 404 on any of
its jobs (existence does not leak); every answer validates
against the schema the file declares for its status (jsonschema, with the
file's $refs resolved and OpenAPI's nullable mapped to JSON Schema).
Exit 0 when all hold; each failure is printed.
"""
import argparse
import copy
import json
import sys
import urllib.error
import urllib.request

import jsonschema
import yaml

ROLES = ["admin", "finance", "engineer", "viewer"]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def resolve(node, root):
    """Inline every $ref and map nullable to JSON Schema."""
    if isinstance(node, list):
        return [resolve(x, root) for x in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = root
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return resolve(target, root)
    out = {k: resolve(v, root) for k, v in node.items() if not k.startswith("x-")}
    if out.pop("nullable", False):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        elif "oneOf" in out:
            out["oneOf"] = out["oneOf"] + [{"type": "null"}]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def call(base, method, path, token=None, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, method=method)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def check_body(what, op, status, ctype, payload):
    responses = op.get("responses", {})
    spec = responses.get(str(status))
    if spec is None:
        fail(f"{what}: status {status} is not declared")
        return None
    content = spec.get("content", {})
    if "application/json" in content:
        if not ctype.startswith("application/json"):
            fail(f"{what}: content type {ctype!r}, expected application/json")
            return None
        try:
            doc = json.loads(payload)
        except ValueError:
            fail(f"{what}: body is not JSON: {payload[:200]!r}")
            return None
        try:
            jsonschema.validate(doc, content["application/json"]["schema"])
        except jsonschema.ValidationError as e:
            fail(f"{what}: answer does not match the schema: {e.message}")
        return doc
    if "text/plain" in content and not ctype.startswith("text/plain"):
        fail(f"{what}: content type {ctype!r}, expected text/plain")
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--routes", required=True)
    a = ap.parse_args()

    with open(a.spec) as f:
        raw_spec = yaml.safe_load(f)
    with open(a.fixture) as f:
        fx = json.load(f)
    tokens = fx["tokens"]
    jsonschema.Draft7Validator.check_schema(resolve(raw_spec["components"]["schemas"]["Job"], raw_spec))

    # Operations the file declares, with their role lists kept.
    ops = []
    for path, item in raw_spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            ops.append((method.upper(), path, op.get("x-tarmac-roles"), resolve(op, raw_spec)))

    # 1. The same operations on both sides.
    served = set()
    with open(a.routes) as f:
        for line in f:
            if line.strip():
                m, p = line.split()
                served.add((m, p))
    declared = {(m, p) for m, p, _, _ in ops}
    for m, p in sorted(served - declared):
        fail(f"{m} {p}: served but not in {a.spec}")
    for m, p in sorted(declared - served):
        fail(f"{m} {p}: in {a.spec} but not served")
    for m, p, roles, _ in ops:
        if not roles:
            fail(f"{m} {p}: no x-tarmac-roles")

    def fresh_job(team):
        st, _, b = call(a.base, "POST", "/v1/jobs", tokens["admin"],
                        {"team": team, "gpus": 1, "name": "matrix"})
        if st != 201:
            fail(f"could not create a job for the matrix: {st} {b[:200]!r}")
            return 0
        return json.loads(b)["id"]

    def body_for(op_id, team):
        return {
            "submitJob": {"team": team, "gpus": 1, "class": "eval", "runtime_estimate_s": 60},
            "retagJob": {"preemptible": True},
            "cancelJob": {"reason": "matrix"},
            "drainNode": {"reason": "matrix"},
            "cordonNode": {"reason": "matrix"},
            "nodeHeartbeat": {"gpus": [{"index": 0, "util_percent": 42.5, "memory_used_mib": 1024}]},
            "nodeInterruption": {"reason": "matrix", "in_s": 120},
            "setBudget": {"cap_cents": 100000, "period": "month", "hard": True, "warn_percent": 80},
        }.get(op_id)

    def concrete(path, job_id):
        return (path.replace("/budgets/{name}", f"/budgets/{fx['team']}")
                    .replace("{name}", fx["pool"])
                    .replace("/jobs/{id}", f"/jobs/{job_id}")
                    .replace("/nodes/{id}", f"/nodes/{fx['node_id']}"))

    # 2. The role matrix, answers checked against the schemas.
    for m, p, roles, op in ops:
        op_id = op.get("operationId", f"{m} {p}")
        body = body_for(op_id, fx["team"])
        req_schema = (op.get("requestBody", {}).get("content", {})
                      .get("application/json", {}).get("schema"))
        if body is not None and req_schema is not None:
            try:
                jsonschema.validate(body, req_schema)
            except jsonschema.ValidationError as e:
                fail(f"{op_id}: the test's own body does not match the file: {e.message}")
        if roles == ["public"]:
            st, ct, b = call(a.base, m, p)
            if st != 200:
                fail(f"{op_id}: public, got {st}")
            check_body(f"{op_id} public", op, st, ct, b)
            continue
        job_id = fresh_job(fx["team"]) if "/jobs/{id}" in p else 0
        path = concrete(p, job_id)
        for label, tok in (("no token", None), ("malformed token", "not-a-token"),
                           ("revoked token", tokens["revoked"])):
            st, ct, b = call(a.base, m, path, tok, body)
            if st != 401:
                fail(f"{op_id} with {label}: got {st}, expected 401")
            check_body(f"{op_id} {label}", op, st, ct, b)
        for role in ROLES:
            if m != "GET" and "/jobs/{id}" in p:
                # A fresh job for each write, so a cancel does not meet a
                # job the previous role already cancelled.
                path = concrete(p, fresh_job(fx["team"]))
            st, ct, b = call(a.base, m, path, tokens[role], body)
            allowed = role in roles
            if allowed and not 200 <= st < 300:
                fail(f"{op_id} as {role}: got {st} {b[:200]!r}, expected 2xx")
            if not allowed and st != 403:
                fail(f"{op_id} as {role}: got {st}, expected 403")
            check_body(f"{op_id} as {role}", op, st, ct, b)
        # An engineer of another team: refused a submit for this team
        # (403), and this team's jobs do not exist for it (404, so
        # existence does not leak), reads and writes alike.
        if "engineer" in roles and "/jobs" in p and (m != "GET" or "{id}" in p):
            if p == "/v1/jobs":
                path, want = p, 403
            else:
                path, want = concrete(p, fresh_job(fx["team"])), 404
            st, ct, b = call(a.base, m, path, tokens["engineer_other"], body)
            if st != want:
                fail(f"{op_id} as an engineer of another team: got {st}, expected {want}")
            check_body(f"{op_id} as other team", op, st, ct, b)

    # 3. Unknown paths and methods answer JSON errors too.
    st, ct, b = call(a.base, "GET", "/v1/nope", tokens["admin"])
    if st != 404 or "error" not in json.loads(b):
        fail(f"unknown path: {st} {b!r}")
    st, ct, b = call(a.base, "DELETE", "/v1/jobs", tokens["admin"])
    if st != 405 or "error" not in json.loads(b):
        fail(f"unknown method: {st} {b!r}")

    print(f"openapi_check: {len(ops)} operations, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
