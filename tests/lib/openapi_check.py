#!/usr/bin/env python3
"""Check a running tarmac API against docs/openapi.yaml.

    openapi_check.py --spec docs/openapi.yaml --base http://127.0.0.1:PORT \
        --fixture fixture.json --routes routes.txt

fixture.json: {"tokens": {"admin": ..., "finance": ..., "engineer": ...,
"viewer": ..., "engineer_other": ..., "revoked": ...}, "team": "<engineer's
team>", "other_team": ..., "node_id": N, "pool": "name"}, and optionally
"max_body_bytes" (the server's api.max_body_bytes; default 262144) and
"ended_node_ids" (nodes terminated or interrupted; else looked up).
routes.txt: "METHOD PATTERN" per line, the server's own route table
(optional: without it the two sides are not compared).

Checks: the file and the server serve the same operations; for every
operation, 401 without a token, with a malformed one and with a revoked
one; exactly the roles in x-tarmac-roles get 2xx, every other role 403; an
engineer of another team gets 403 submitting for a team and 404 on any of
its jobs (existence does not leak); every answer validates
against the schema the file declares for its status (jsonschema, with the
file's $refs resolved and OpenAPI's nullable mapped to JSON Schema).

Then the contract: every operation of the file is driven with (a) a valid
request (with `; charset=utf-8`, and without a body or Content-Type where
the body is optional; lists with limit=1), (b) where it takes a body, a
malformed one, one with a NUL escape, a raw control character, invalid
UTF-8, a byte-order mark or a leading zero, one sent as text/plain, and
bodies just over and far over the size limit, (c) an unknown and a
malformed path parameter value, an unknown query parameter, and a method
the path does not take (405 with Allow); and a heartbeat or interruption
notice for a node that has ended (409).  Every answer's status must be one
the file lists for the operation and its body must match that status's
schema: an undocumented status is a failure.

Checks of behaviour the server does not have yet are tagged
with a name in NEW_BEHAVIOUR; --skip-new leaves them out (also
TM_OPENAPI_SKIP_NEW=1 in the environment).  Their failures say
[new: NAME].
Exit 0 when all hold; each failure is printed.
"""
import argparse
import http.client
import json
import os
import sys
import urllib.parse

import jsonschema
import yaml

ROLES = ["admin", "finance", "engineer", "viewer", "agent"]
# Operations whose valid request may meet a job that is not running on the
# node (attempt fencing: 409 naming attempt), and the enrollment, whose
# test secret is never valid (401): their "allowed" answers.
ALLOWED_ALSO = {"agentJobStart": {409}, "agentJobExit": {409}, "agentEnroll": {401},
                # The matrix's pool is bought, not owned, and its token a
                # made-up one: the join is refused, naming the field.
                "agentJoin": {400, 401},
                # The matrix's jobs never run: no output, no stream to open.
                "getJobLogs": {404}, "agentLogChunks": {404, 409}}
failures = []

# Checks of behaviour asked of the server and main does not have
# yet.  --skip-new turns these off.
NEW_BEHAVIOUR = {
    "415-content-type",      # a body that is not application/json: 415
    "400-oversize-any",      # a body far over max_body_bytes: 400 "body" (not h2o's 413)
    "405-allow",             # a 405 carries Allow with the path's methods
    "409-heartbeat-ended",   # a heartbeat for a terminated/interrupted node: 409
}
skip_new = False


def is_off(tag):
    return tag is not None and tag in NEW_BEHAVIOUR and skip_new


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


def request(base, method, path, token=None, body=None, raw=None, ctype="application/json"):
    """(status, headers, payload); status None when no answer came.  ctype
    None sends no Content-Type."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    u = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    headers = {}
    if token is not None:
        headers["Authorization"] = "Bearer " + token
    if data is not None and ctype is not None:
        headers["Content-Type"] = ctype
    try:
        try:
            conn.request(method, path, body=data, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer before reading everything
        try:
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        except (http.client.HTTPException, OSError) as e:
            return None, {}, f"no answer: {e}".encode()
    finally:
        conn.close()


def call(base, method, path, token=None, body=None, raw=None):
    st, h, b = request(base, method, path, token, body, raw)
    return st, h.get("Content-Type", "") if h else "", b


def check_body(what, op, status, ctype, payload):
    responses = op.get("responses", {})
    if status is None:
        fail(f"{what}: {payload.decode(errors='replace')}")
        return None
    spec = responses.get(str(status))
    if spec is None:
        fail(f"{what}: status {status} is not declared ({payload[:160]!r})")
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


# ---- the contract ----------------------------------------------------------

MARK = "@@INJECT@@"


def _first(node, want):
    """The path (keys/indices) to the first value for which want(v) holds."""
    if isinstance(node, dict):
        for k, v in node.items():
            if want(v):
                return [k]
            sub = _first(v, want)
            if sub is not None:
                return [k] + sub
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if want(v):
                return [i]
            sub = _first(v, want)
            if sub is not None:
                return [i] + sub
    return None


def _set(node, path, value):
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def inject_string(body, raw):
    """body as JSON text with raw bytes put inside its first string (or,
    when it has none, its first key)."""
    doc = json.loads(json.dumps(body))
    path = _first(doc, lambda v: isinstance(v, str))
    if path is not None:
        _set(doc, path, MARK + "x")
    else:
        k = next(iter(doc))
        doc = {(k + MARK if i == 0 else kk): vv for i, (kk, vv) in enumerate(doc.items())}
    return json.dumps(doc).encode().replace(MARK.encode(), raw)


def leading_zero(body):
    doc = json.loads(json.dumps(body))
    path = _first(doc, lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
    if path is None:
        return None
    v = doc
    for k in path:
        v = v[k]
    _set(doc, path, MARK)
    return json.dumps(doc).encode().replace(f'"{MARK}"'.encode(), b"0" + str(v).encode())


def contract(a, spec, ops, fx, fresh_job, body_for, concrete):
    tokens = fx["tokens"]
    max_body = int(fx.get("max_body_bytes", 262144))
    methods_of = {}
    for m, p, _, _ in ops:
        methods_of.setdefault(p, set()).add(m)

    def run(tag, what, op, m, path, token, want=None, field=None, **kw):
        """One request; its status must be documented for op and its body
        match the schema; want (a set) and field narrow it further."""
        if is_off(tag):
            return None, {}, None
        label = f"{what}" + (f" [new: {tag}]" if tag in NEW_BEHAVIOUR else "")
        st, h, b = request(a.base, m, path, token, **kw)
        if st is not None and want is not None and st not in want:
            # One failure per request: the status, and whether it is declared.
            declared = "" if str(st) in op.get("responses", {}) else " (not declared)"
            fail(f"{label}: got {st}{declared} {b[:160]!r}, expected {sorted(want)}")
            if declared:
                return st, h, None
        doc = check_body(label, op, st, h.get("Content-Type", "") if h else "", b)
        if st is not None and want is not None and st not in want:
            pass
        elif field is not None and isinstance(doc, dict) and st is not None and st >= 400:
            got = doc.get("field")
            if (field is True and not got) or (field is not True and got != field):
                fail(f"{label}: field {got!r}, expected {'a field' if field is True else field!r}")
        return st, h, doc

    def token_for(roles):
        if roles == ["public"]:
            return None
        return tokens["admin"] if "admin" in roles else tokens[roles[0]]

    def path_for(p):
        return concrete(p, fresh_job(fx["team"]) if "/jobs/{id}" in p or "{job}" in p else 0)

    for m, p, roles, op in ops:
        op_id = op.get("operationId", f"{m} {p}")
        ok2xx = set(range(200, 300)) | ALLOWED_ALSO.get(op_id, set())
        tok = token_for(roles)
        rb = op.get("requestBody")
        body = body_for(op_id, fx["team"])

        # (a) Valid requests.
        if rb is not None and body is not None:
            run(None, f"{op_id} with charset=utf-8", op, m, path_for(p), tok, ok2xx, body=body,
                ctype="application/json; charset=utf-8")
            if not rb.get("required"):
                run(None, f"{op_id} without a body or Content-Type", op, m, path_for(p), tok,
                    ok2xx, ctype=None)
        names = {x.get("name") for x in op.get("parameters", []) if x.get("in") == "query"}
        if "limit" in names:
            run(None, f"{op_id}?limit=1", op, m, path_for(p) + "?limit=1", tok, ok2xx)
        if names:
            run(None, f"{op_id} with an unknown query parameter", op, m,
                path_for(p) + "?no_such_param=1", tok, {400}, field="no_such_param")
            if "limit" in names:
                run(None, f"{op_id}?limit=0", op, m, path_for(p) + "?limit=0", tok, {400},
                    field="limit")

        # (b) Bad bodies.
        if rb is not None and body is not None and m != "GET":
            bad = [
                ("malformed JSON", b'{"' + next(iter(body)).encode() + b'": ', "body"),
                ("a NUL escape in a string", inject_string(body, b"\\u0000"), True),
                ("a raw control character in a string", inject_string(body, b"\x01"), True),
                ("invalid UTF-8 in a string", inject_string(body, b"\xff\xfe"), True),
                ("a byte-order mark", b"\xef\xbb\xbf" + json.dumps(body).encode(), "body"),
            ]
            lz = leading_zero(body)
            if lz is not None:
                bad.append(("a number with a leading zero", lz, True))
            for label, raw, field in bad:
                run(None, f"{op_id} with {label}", op, m, path_for(p), tok, {400}, field=field,
                    raw=raw)
            run("415-content-type", f"{op_id} with Content-Type text/plain", op, m, path_for(p),
                tok, {415}, raw=json.dumps(body).encode(), ctype="text/plain")
            pad = json.dumps(body).encode()
            pad = pad[:-1] + b', "pad": "' + b"x" * max(0, max_body - len(pad)) + b'"}'
            run(None, f"{op_id} with a body just over max_body_bytes", op, m, path_for(p), tok,
                {400}, field="body", raw=pad)
            far = b'{"pad": "' + b"x" * (4 * max_body + 8192) + b'"}'
            run("400-oversize-any", f"{op_id} with a body far over max_body_bytes", op, m,
                path_for(p), tok, {400}, field="body", raw=far)

        # (c) Path parameters: unknown and malformed values.
        if "{id}" in p:
            unknown = p.replace("{id}", "999999999999").replace("{job}", "1")
            run(None, f"{op_id} with an unknown id", op, m, unknown, tok, {404}, body=body)
            for bad_id in ("abc", "0", "-1", "1x"):
                run(None, f"{op_id} with id {bad_id!r}", op, m,
                    p.replace("{id}", bad_id).replace("{job}", "1"), tok,
                    {400, 404}, body=body)
        if "{name}" in p:
            if p.startswith("/v1/quotas/") and m == "DELETE":
                # Removing what is not there removes nothing.
                run(None, f"{op_id} for an unknown team", op, m, p.replace("{name}", "no-such-team-x"),
                    tok, {200}, body=body)
            elif p.startswith("/v1/budgets/") or p.startswith("/v1/quotas/"):
                # A name nobody uses is an unknown team: 400 naming it.
                run(None, f"{op_id} for an unknown team", op, m, p.replace("{name}", "no-such-team-x"),
                    tok, {400}, field="team", body=body)
            else:
                run(None, f"{op_id} with an unknown name", op, m, p.replace("{name}", "no-such-x"),
                    tok, {404}, body=body)
            for bad_name in ("-x", "a%20b", "x" * 64):
                run(None, f"{op_id} with name {bad_name[:12]!r}", op, m,
                    p.replace("{name}", bad_name), tok, {400, 404}, body=body)

    # A method the path does not take: 405, with Allow listing the ones it does.
    for p, methods in sorted(methods_of.items()):
        op = next(o for m, pp, _, o in ops if pp == p)
        path = concrete(p, fresh_job(fx["team"]) if "/jobs/{id}" in p else 0)
        for m in ("PATCH",) if "DELETE" in methods else ("DELETE",):
            st, h, _ = run(None, f"{m} {p}", op, m, path, tokens["admin"], {405})
            if st != 405 or is_off("405-allow"):
                continue
            allow = {x.strip().upper() for x in (h.get("Allow") or "").split(",") if x.strip()}
            if not allow:
                fail(f"{m} {p} [new: 405-allow]: 405 without Allow")
            elif not methods <= allow or m in allow:
                fail(f"{m} {p} [new: 405-allow]: Allow {h.get('Allow')!r}, expected {sorted(methods)}")

    # A node that has ended: its heartbeat and interruption notice are 409.
    ended = list(fx.get("ended_node_ids", []))
    if not ended:
        for state in ("terminated", "interrupted"):
            st, _, b = call(a.base, "GET", f"/v1/nodes?state={state}&limit=1", tokens["admin"])
            if st == 200:
                ended += [n["id"] for n in json.loads(b)["items"]]
    if not ended:
        print("NOTE: no terminated or interrupted node: the 409 for one is not checked")
    by_id = {o.get("operationId"): o for _, _, _, o in ops}
    for node in ended:
        run("409-heartbeat-ended", f"nodeHeartbeat for ended node {node}", by_id["nodeHeartbeat"],
            "POST", f"/v1/nodes/{node}/heartbeat", tokens["admin"], {409}, body={})
        run(None, f"nodeInterruption for ended node {node}", by_id["nodeInterruption"], "POST",
            f"/v1/nodes/{node}/interruption", tokens["admin"], {409}, body={})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--routes")
    ap.add_argument("--skip-new", action="store_true",
                    help="leave out the checks tagged NEW_BEHAVIOUR")
    a = ap.parse_args()
    global skip_new
    skip_new = a.skip_new or os.environ.get("TM_OPENAPI_SKIP_NEW") == "1"

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
    if a.routes:
        with open(a.routes) as f:
            for line in f:
                if line.strip():
                    m, p = line.split()
                    served.add((m, p))
    declared = {(m, p) for m, p, _, _ in ops}
    if not a.routes:
        served = declared
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
            "uncordonNode": {"reason": "matrix"},
            "nodeHeartbeat": {"gpus": [{"index": 0, "util_percent": 42.5, "memory_used_mib": 1024}]},
            "nodeInterruption": {"reason": "matrix", "in_s": 120},
            "agentJobStart": {"attempt": 1, "pid": 4242},
            "agentJobExit": {"attempt": 1, "exit_code": 0, "reason": "exited"},
            "agentLogChunks": {"chunks": [{"job": 1, "attempt": 1, "rank": 0, "offset": 0, "data": "aGkK"}]},
            "agentEnroll": {"node_id": fx["node_id"], "secret": "tme_not-a-secret"},
            "agentJoin": {"pool": fx["pool"], "node_key": "k" * 40, "join_token": "not-a-join-token",
                          "hardware": {"gpus": 1, "gpu_model": "A100", "gpu_memory_mib": 1,
                                       "cpus": 1, "memory_mib": 1}},
            "setBudget": {"cap_cents": 100000, "period": "month", "hard": True, "warn_percent": 80},
            "setQuota": {"gpus": 1},
        }.get(op_id)

    def concrete(path, job_id):
        return (path.replace("/budgets/{name}", f"/budgets/{fx['team']}")
                    .replace("/quotas/{name}", f"/quotas/{fx['team']}")
                    .replace("{job}", str(job_id or 1))
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
            st, ct, b = call(a.base, m, p, None, body)
            if st != 200 and st not in ALLOWED_ALSO.get(op_id, set()):
                fail(f"{op_id}: public, got {st}")
            check_body(f"{op_id} public", op, st, ct, b)
            continue
        job_id = fresh_job(fx["team"]) if "/jobs/{id}" in p or "{job}" in p else 0
        path = concrete(p, job_id)
        for label, tok in (("no token", None), ("malformed token", "not-a-token"),
                           ("revoked token", tokens["revoked"])):
            st, ct, b = call(a.base, m, path, tok, body)
            if st != 401:
                fail(f"{op_id} with {label}: got {st}, expected 401")
            check_body(f"{op_id} {label}", op, st, ct, b)
        for role in ROLES:
            if role not in tokens:
                continue  # a fixture without that role (test_api.c has no agent)
            if m != "GET" and "/jobs/{id}" in p:
                # A fresh job for each write, so a cancel does not meet a
                # job the previous role already cancelled.
                path = concrete(p, fresh_job(fx["team"]))
            st, ct, b = call(a.base, m, path, tokens[role], body)
            allowed = role in roles
            if allowed and not 200 <= st < 300 and st not in ALLOWED_ALSO.get(op_id, set()):
                fail(f"{op_id} as {role}: got {st} {b[:200]!r}, expected 2xx")
            if not allowed and st != 403:
                fail(f"{op_id} as {role}: got {st}, expected 403")
            check_body(f"{op_id} as {role}", op, st, ct, b)
        # An agent token bound to another node: refused on this node's routes.
        if "agent" in roles and "agent_other" in tokens:
            st, ct, b = call(a.base, m, path, tokens["agent_other"], body)
            if st != 403:
                fail(f"{op_id} as another node's agent: got {st}, expected 403")
            check_body(f"{op_id} as another node's agent", op, st, ct, b)
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

    contract(a, raw_spec, ops, fx, fresh_job, body_for, concrete)

    print(f"openapi_check: {len(ops)} operations, {len(failures)} failure(s)"
          + (" (new-behaviour checks skipped)" if skip_new else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
