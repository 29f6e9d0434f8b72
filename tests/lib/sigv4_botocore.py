#!/usr/bin/env python3
"""Cross-check our SigV4 EC2 signing and form encoding against botocore.

Usage: sigv4_botocore.py DRIVER [N]

DRIVER is `test_sigv4` (run as `DRIVER --sign-stdin`: JSON case per line in,
JSON answer per line out; see tests/unit/providers/aws/test_sigv4.c).  N random EC2 POST
cases (default 400) are made from a fixed seed: random actions and
parameters (unicode, spaces, reserved characters, empty values), endpoints
(with and without ports, default ports, paths), regions, dates, keys, and
with or without a session token.  For each, botocore's own encoder
(botocore.utils.percent_encode_sequence, what its EC2 serializer uses) gives
the body and botocore.auth.SigV4Auth gives the Authorization; the C side must
agree byte for byte on the body, the X-Amz-Date, the token header and the
Authorization.  Exit 0 only if every case matches; a mismatch prints the case.
"""
import datetime
import json
import random
import subprocess
import sys

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode_sequence

ACTIONS = ["RunInstances", "TerminateInstances", "DescribeInstances", "CreateTags",
           "DescribeSpotPriceHistory", "CreateFleet", "DescribeInstanceTypes"]
REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-2", "eu-central-1"]
ENDPOINTS = ["https://ec2.{r}.amazonaws.com", "https://ec2.{r}.amazonaws.com/",
             "http://127.0.0.1:5000", "http://localhost:5000/", "https://ec2.{r}.amazonaws.com:443",
             "http://127.0.0.1:80", "https://vpce-1a2b.ec2.{r}.vpce.amazonaws.com:8443/",
             "http://[::1]:5000", "http://127.0.0.1:5000/some/path"]
ALPHABET = ("abcXYZ019 -_.~!*'()&=+/?#[]@$,;:%\"<>\\^`{|}" + "\t"
            + "é€ሴ日本語😀ß\u00a0")
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def rand_text(rng, lo, hi):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(lo, hi)))


def make_case(rng):
    region = rng.choice(REGIONS)
    params = [["Action", rng.choice(ACTIONS)], ["Version", "2016-11-15"]]
    for i in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.3:
            params.append([f"InstanceId.{i + 1}", "i-%017x" % rng.getrandbits(68)])
        elif kind < 0.6:
            params.append([f"TagSpecification.1.Tag.{i + 1}.Key", rand_text(rng, 1, 12)])
            params.append([f"TagSpecification.1.Tag.{i + 1}.Value", rand_text(rng, 0, 40)])
        elif kind < 0.8:
            params.append([f"Filter.{i + 1}.Name", "tag:" + rand_text(rng, 1, 8)])
            params.append([f"Filter.{i + 1}.Value.1", rand_text(rng, 0, 20)])
        else:
            params.append([rand_text(rng, 1, 10), rand_text(rng, 0, 30)])
    when = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        seconds=rng.randint(0, 40 * 365 * 86400))
    token = None
    if rng.random() < 0.5:
        token = "".join(rng.choice(B64) for _ in range(rng.randint(16, 1200)))
    return {
        "url": rng.choice(ENDPOINTS).format(r=region),
        "region": region,
        "date": when.strftime("%Y%m%dT%H%M%SZ"),
        "when": when,
        "ak": "AKIA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") for _ in range(16)),
        "sk": "".join(rng.choice(B64[:-1]) for _ in range(40)),
        "token": token,
        "params": params,
    }


def botocore_sign(case):
    body = percent_encode_sequence([tuple(p) for p in case["params"]])
    req = AWSRequest(method="POST", url=case["url"], data=body.encode("utf-8"),
                     headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    when = case["when"]
    orig = botocore.auth.get_current_datetime
    # The clock is the one input botocore does not take as an argument.
    botocore.auth.get_current_datetime = lambda *a, **k: when.replace(tzinfo=None)
    try:
        botocore.auth.SigV4Auth(Credentials(case["ak"], case["sk"], case["token"]), "ec2",
                                case["region"]).add_auth(req)
    finally:
        botocore.auth.get_current_datetime = orig
    return body, req.headers


def main():
    driver = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    rng = random.Random(20150830)
    cases = [make_case(rng) for _ in range(n)]
    lines = "".join(json.dumps({k: v for k, v in c.items() if k != "when"}) + "\n" for c in cases)
    out = subprocess.run([driver, "--sign-stdin"], input=lines.encode("utf-8"),
                         stdout=subprocess.PIPE, check=True, timeout=120).stdout.decode("utf-8")
    answers = out.splitlines()
    if len(answers) != n:
        print(f"driver answered {len(answers)} lines for {n} cases")
        return 1
    bad = 0
    tokens = 0
    for i, (case, line) in enumerate(zip(cases, answers)):
        got = json.loads(line)
        body, headers = botocore_sign(case)
        problems = []
        if not headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 Credential="):
            problems.append("botocore produced no Authorization")
        elif "error" in got:
            problems.append(f"driver error {got['error']}")
        else:
            ours = dict(h.split(": ", 1) for h in got["headers"])
            if got["body"] != body:
                problems.append(f"body\n  ours     {got['body']!r}\n  botocore {body!r}")
            for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
                if ours.get(name) != headers.get(name):
                    problems.append(f"{name}\n  ours     {ours.get(name)!r}\n  botocore {headers.get(name)!r}")
        if case["token"]:
            tokens += 1
        if problems:
            bad += 1
            if bad <= 5:
                shown = {k: v for k, v in case.items() if k not in ("when", "sk", "token")}
                print(f"case {i} differs: {json.dumps(shown, ensure_ascii=False)}")
                for p in problems:
                    print("  " + p)
    print(f"sigv4 botocore cross-check: {n - bad}/{n} cases agree ({tokens} with a session token)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
