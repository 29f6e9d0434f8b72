#!/usr/bin/env python3
"""Cross-check our SigV4 S3 signing against botocore's S3SigV4Auth.

Usage: sigv4_s3_botocore.py DRIVER [N]

DRIVER is `test_sigv4` (run as `DRIVER --sign-s3-stdin`; see
tests/unit/providers/aws/test_sigv4.c).  N random path-style S3 requests
(default 300) from a fixed seed: PUT, GET with a Range, ListObjectsV2
queries, DeleteObjects with Content-MD5, keys with spaces, reserved and
non-ASCII characters, endpoints with and without ports, bodies of random
bytes, with or without a session token.  botocore signs the same request
(its S3 rule: the path as sent, never normalised or encoded twice; the
payload's SHA-256 in X-Amz-Content-Sha256); the Authorization, the
X-Amz-Content-Sha256 and the wire path must agree byte for byte.
"""
import base64
import datetime
import hashlib
import json
import random
import subprocess
import sys
import types
import urllib.parse

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2"]
ENDPOINTS = ["https://s3.{r}.amazonaws.com", "http://127.0.0.1:9000", "http://localhost:5000",
             "https://minio.example.com:9443", "http://[::1]:9000"]
KEYCHARS = "abcXYZ019-_.~ !$&'()*+,;=:@%/é日😀"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def rand_key(rng):
    return "logs/" + "".join(rng.choice(KEYCHARS) for _ in range(rng.randint(1, 40)))


def make_case(rng):
    region = rng.choice(REGIONS)
    kind = rng.choice(["put", "get", "list", "delete"])
    key, query, extra, body = None, None, [], b""
    if kind == "put":
        key = rand_key(rng)
        body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 2000)))
        extra.append("Content-Type:application/octet-stream")
        method = "PUT"
    elif kind == "get":
        key = rand_key(rng)
        lo = rng.randint(0, 1 << 40)
        extra.append(f"Range:bytes={lo}-{lo + rng.randint(0, 1 << 20)}")
        method = "GET"
    elif kind == "list":
        q = {"list-type": "2", "max-keys": "1000", "prefix": rand_key(rng)}
        if rng.random() < 0.5:
            q["continuation-token"] = "".join(rng.choice(B64) for _ in range(rng.randint(8, 80)))
        query = "&".join(f"{k}={urllib.parse.quote(v, safe='-_.~')}" for k, v in q.items())
        method = "GET"
    else:
        body = ("<Delete><Quiet>true</Quiet>" + "".join(
            f"<Object><Key>logs/{i}</Key></Object>" for i in range(rng.randint(1, 30)))
            + "</Delete>").encode()
        extra.append("Content-Type:application/xml")
        extra.append("Content-MD5:" + base64.b64encode(hashlib.md5(body).digest()).decode())
        query = "delete="
        method = "POST"
    when = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        seconds=rng.randint(0, 40 * 365 * 86400))
    token = None
    if rng.random() < 0.4:
        token = "".join(rng.choice(B64) for _ in range(rng.randint(16, 800)))
    return {
        "method": method,
        "url": rng.choice(ENDPOINTS).format(r=region),
        "bucket": "tarmac-logs-%d" % rng.randint(0, 999),
        "key": key,
        "query": query,
        "extra": extra,
        "body_hex": body.hex(),
        "region": region,
        "date": when.strftime("%Y%m%dT%H%M%SZ"),
        "when": when,
        "ak": "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)),
        "sk": "".join(rng.choice(B64[:-1]) for _ in range(40)),
        "token": token,
    }


def botocore_sign(case):
    path = "/" + case["bucket"]
    if case["key"] is not None:
        path += "/" + urllib.parse.quote(case["key"], safe="/-_.~")
    url = case["url"] + path + ("?" + case["query"] if case["query"] else "")
    headers = dict(e.split(":", 1) for e in case["extra"])
    req = AWSRequest(method=case["method"], url=url, data=bytes.fromhex(case["body_hex"]),
                     headers=headers)
    # Payload signing on, as our client always does (botocore would skip it
    # over https with a Content-MD5).
    req.context["client_config"] = types.SimpleNamespace(s3={"payload_signing_enabled": True})
    when = case["when"]
    orig = botocore.auth.get_current_datetime
    botocore.auth.get_current_datetime = lambda *a, **k: when.replace(tzinfo=None)
    try:
        botocore.auth.S3SigV4Auth(Credentials(case["ak"], case["sk"], case["token"]), "s3",
                                  case["region"]).add_auth(req)
    finally:
        botocore.auth.get_current_datetime = orig
    return path, req.headers


def main():
    driver = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    rng = random.Random(20130524)
    cases = [make_case(rng) for _ in range(n)]
    lines = "".join(json.dumps({k: v for k, v in c.items() if k != "when"}) + "\n" for c in cases)
    out = subprocess.run([driver, "--sign-s3-stdin"], input=lines.encode("utf-8"),
                         stdout=subprocess.PIPE, check=True, timeout=120).stdout.decode("utf-8")
    answers = out.splitlines()
    if len(answers) != n:
        print(f"driver answered {len(answers)} lines for {n} cases")
        return 1
    bad = 0
    for i, (case, line) in enumerate(zip(cases, answers)):
        got = json.loads(line)
        path, headers = botocore_sign(case)
        problems = []
        if "error" in got:
            problems.append(f"driver error {got['error']}")
        else:
            ours = dict(h.split(": ", 1) for h in got["headers"])
            if got["path"] != path:
                problems.append(f"path\n  ours     {got['path']!r}\n  botocore {path!r}")
            for name in ("Authorization", "X-Amz-Content-SHA256", "X-Amz-Security-Token"):
                mine = ours.get("X-Amz-Content-Sha256") if name == "X-Amz-Content-SHA256" else ours.get(name)
                if mine != headers.get(name):
                    problems.append(f"{name}\n  ours     {mine!r}\n  botocore {headers.get(name)!r}")
        if problems:
            bad += 1
            if bad <= 5:
                shown = {k: v for k, v in case.items() if k not in ("when", "sk", "token", "body_hex")}
                print(f"case {i} differs: {json.dumps(shown, ensure_ascii=False)}")
                for p in problems:
                    print("  " + p)
    print(f"sigv4 S3 botocore cross-check: {n - bad}/{n} cases agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
