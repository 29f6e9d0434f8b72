#!/usr/bin/env python3
"""tests/lib/ec2_reservation_fake.py: EC2 capacity reservations, beside moto.

    ec2_reservation_fake.py UPSTREAM_PORT

moto 5.2.1 has no capacity reservations (DescribeCapacityReservations is
"not implemented", and RunInstances takes any InstanceMarketOptions for
spot).  This loopback server stands in front of moto and serves what moto
lacks; everything else goes to moto.  It listens on a free 127.0.0.1 port,
prints "EC2_RESV_FAKE_PORT=N" then "EC2_RESV_FAKE_READY".  The access key
moto checks comes from EC2_FAKE_ACCESS_KEY_ID / EC2_FAKE_SECRET_ACCESS_KEY
(the environment only: never an argument, never printed).

Checked against botocore's EC2 model (service-2.json of the installed
botocore), on every request:
  - the SigV4 signature, recomputed with botocore.auth.SigV4Auth;
  - the form body, read back into the operation's input shape by the ec2
    protocol's names (Name.N lists, queryName / locationName members):
    a key the model does not have, an integer or boolean that is not one,
    a value outside its enum, and botocore's ParamValidator (required
    members, types, ranges) are violations;
and on every answer the fake writes or rewrites: the dict is checked with
ParamValidator against the output shape, written as XML by the shape's
locationNames, and parsed back with botocore's own ec2 parser, which must
give the same dict.  A violation is answered 400 FakeModelViolation and
counted in the stats, so a test asserts there were none.

Served here:
  DescribeCapacityReservations   the reservations below (ids asked for; an
                                 unknown id is InvalidCapacityReservationId.NotFound
                                 naming it, as EC2 does)
  RunInstances with CapacityReservationSpecification.CapacityReservationTarget.
                 CapacityReservationId: refused unless the reservation exists
                 (NotFound), is active (InvalidCapacityReservationId.Malformed
                 "... is not active"), matches type and zone
                 (InvalidParameterCombination), and is asked with MarketType
                 capacity-block exactly when it is a block; a full one is
                 ReservationCapacityExceeded.  Otherwise forwarded to moto
                 without the market type (re-signed), and the instance is
                 counted in the reservation; answers (and later
                 DescribeInstances) carry its capacityReservationId (and a
                 block's instanceLifecycle capacity-block).
  TerminateInstances             forwarded; the instances' slots are freed.

Control (JSON, never forwarded):
  POST /__fake/reservation  {"id", "instance_type", "zone", "total",
                            "state" (default active), "type" (default|capacity-block),
                            "start", "end" (ISO 8601, optional)}: create or replace
  POST /__fake/state        {"id", "state"}: e.g. cancelled, expired
  POST /__fake/full         {"id"}: every slot taken (available 0)
  POST /__fake/delay        {"seconds": S}: a RunInstances into a reservation waits
                            S after moto made the instance before answering
  GET  /__fake/stats        {"violations": [...], "run_into": {id: n}, "actions": [...],
                            "reservations": {id: {"available": n, "instances": [...]}}}
"""
import datetime
import http.client
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl

import botocore.auth
import botocore.parsers
import botocore.session
import botocore.validate
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.utils import percent_encode_sequence

import os

UPSTREAM = int(sys.argv[1])
MODEL = botocore.session.get_session().get_service_model("ec2")
KEY_ID = os.environ.get("EC2_FAKE_ACCESS_KEY_ID", "")
SECRET = os.environ.get("EC2_FAKE_SECRET_ACCESS_KEY", "")
NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
lock = threading.Lock()
reservations = {}       # id -> dict
owner = {}              # instance id -> reservation id
stats = {"violations": [], "run_into": {}, "actions": []}
delay = [0.0]


class Violation(Exception):
    pass


# ---- the model: requests -----------------------------------------------------

def query_name(name, member):
    ser = member.serialization
    if "queryName" in ser:
        return ser["queryName"]
    if "name" in ser:
        return ser["name"][0].upper() + ser["name"][1:]
    return name


def scalar(shape, value, key):
    t = shape.type_name
    if t in ("integer", "long"):
        if not re.fullmatch(r"-?[0-9]+", value):
            raise Violation("%s: %r is not an integer" % (key, value))
        return int(value)
    if t == "boolean":
        if value not in ("true", "false"):
            raise Violation("%s: %r is not a boolean" % (key, value))
        return value == "true"
    if t in ("double", "float"):
        return float(value)
    if t == "string" and shape.enum and value not in shape.enum:
        raise Violation("%s: %r is not one of %s" % (key, value, shape.enum))
    return value


def unflatten(params, shape, prefix, used):
    """The value of shape under prefix in the flat form params."""
    if shape.type_name == "structure":
        out = {}
        for name, member in shape.members.items():
            sub = (prefix + "." if prefix else "") + query_name(name, member)
            v = unflatten(params, member, sub, used)
            if v is not None:
                out[name] = v
        return out or None
    if shape.type_name == "list":
        idx = sorted({int(m.group(1)) for k in params
                      for m in [re.match(re.escape(prefix) + r"\.([0-9]+)(\.|$)", k)] if m})
        if not idx:
            return None
        if idx != list(range(1, len(idx) + 1)):
            raise Violation("%s: list indices %s do not run 1..N" % (prefix, idx))
        return [unflatten(params, shape.member, "%s.%d" % (prefix, i), used) for i in idx]
    if shape.type_name == "map":
        raise Violation("%s: maps are not expected in EC2 requests" % prefix)
    if prefix not in params:
        return None
    used.add(prefix)
    return scalar(shape, params[prefix], prefix)


def check_request(action, params):
    try:
        op = MODEL.operation_model(action)
    except Exception:
        raise Violation("unknown action %r" % action)
    rest = {k: v for k, v in params.items() if k not in ("Action", "Version")}
    if params.get("Version") != MODEL.api_version:
        raise Violation("Version %r, the model's is %s" % (params.get("Version"), MODEL.api_version))
    used = set()
    value = unflatten(rest, op.input_shape, "", used) or {}
    extra = sorted(set(rest) - used)
    if extra:
        raise Violation("%s: parameters the model does not have: %s" % (action, ", ".join(extra)))
    report = botocore.validate.ParamValidator().validate(value, op.input_shape)
    if report.has_errors():
        raise Violation("%s: %s" % (action, report.generate_report()))
    return value


# ---- the model: answers --------------------------------------------------------

def xml_value(value, shape, tag):
    if shape.type_name == "structure":
        inner = "".join(xml_value(value[n], m, m.serialization.get("name", n))
                        for n, m in shape.members.items() if n in value)
        return "<%s>%s</%s>" % (tag, inner, tag)
    if shape.type_name == "list":
        item = shape.member.serialization.get("name", "item")
        return "<%s>%s</%s>" % (tag, "".join(xml_value(v, shape.member, item) for v in value), tag)
    if shape.type_name == "timestamp":
        text = value.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    elif shape.type_name == "boolean":
        text = "true" if value else "false"
    else:
        text = str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "<%s>%s</%s>" % (tag, text, tag)


def answer_xml(action, value):
    """value checked against the output shape, written, and read back by
    botocore's parser to the same value."""
    op = MODEL.operation_model(action)
    shape = op.output_shape
    report = botocore.validate.ParamValidator().validate(value, shape)
    if report.has_errors():
        raise Violation("%s answer: %s" % (action, report.generate_report()))
    inner = "".join(xml_value(value[n], m, m.serialization.get("name", n))
                    for n, m in shape.members.items() if n in value)
    body = '<?xml version="1.0" encoding="UTF-8"?>\n<%sResponse xmlns="%s"><requestId>fake-%d</requestId>%s</%sResponse>' % (
        action, NS, int(time.time() * 1000), inner, action)
    parsed = botocore.parsers.create_parser("ec2").parse(
        {"body": body.encode(), "headers": {}, "status_code": 200}, shape)
    parsed.pop("ResponseMetadata", None)
    if parsed != value:
        raise Violation("%s answer does not read back: %r != %r" % (action, parsed, value))
    return body


def check_moto_answer(action, data):
    """An answer moto wrote and the fake rewrote: botocore must read it."""
    op = MODEL.operation_model(action)
    parsed = botocore.parsers.create_parser("ec2").parse(
        {"body": data, "headers": {}, "status_code": 200}, op.output_shape)
    parsed.pop("ResponseMetadata", None)
    report = botocore.validate.ParamValidator().validate(parsed, op.output_shape)
    if report.has_errors():
        raise Violation("%s answer: %s" % (action, report.generate_report()))


ERR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
       '<Message>{msg}</Message></Error></Errors><RequestID>ec2-reservation-fake</RequestID></Response>')


class Refusal(Exception):
    def __init__(self, code, msg, status=400):
        super().__init__(msg)
        self.code, self.msg, self.status = code, msg, status


# ---- signatures ------------------------------------------------------------------

def verify_signature(headers, path, body):
    auth = headers.get("Authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/([0-9]{8})/([^/]+)/([^/]+)/aws4_request, "
                 r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)
    if not m:
        raise Refusal("IncompleteSignature", "no SigV4 Authorization header", 403)
    key, _, region, service, signed, signature = m.groups()
    if key != KEY_ID or not SECRET:
        raise Refusal("AuthFailure", "unknown access key", 401)
    names = signed.split(";")
    req = AWSRequest(method="POST", url="http://%s%s" % (headers.get("Host", ""), path), data=body,
                     headers={h: headers[h] for h in names if h != "host" and h in headers})
    req.context["timestamp"] = headers.get("X-Amz-Date", "")
    signer = botocore.auth.SigV4Auth(
        Credentials(key, SECRET, headers.get("X-Amz-Security-Token")), service, region)
    canonical = signer.canonical_request(req)
    want = signer.signature(signer.string_to_sign(req, canonical), req)
    if want != signature:
        raise Refusal("SignatureDoesNotMatch", "the request signature does not match", 403)


def resign(headers, path, body):
    m = re.search(r"Credential=[^/]+/[0-9]{8}/([^/]+)/([^/]+)/", headers.get("Authorization", ""))
    region, service = m.groups()
    req = AWSRequest(method="POST", url="http://%s%s" % (headers["Host"], path), data=body,
                     headers={"Content-Type": headers.get("Content-Type",
                                                          "application/x-www-form-urlencoded")})
    token = headers.get("X-Amz-Security-Token")
    if token:
        req.headers["X-Amz-Security-Token"] = token
    botocore.auth.SigV4Auth(Credentials(KEY_ID, SECRET, token), service, region).add_auth(req)
    out = dict(req.headers.items())
    out["Host"] = headers["Host"]
    out["Content-Length"] = str(len(body))
    return out


# ---- reservations -------------------------------------------------------------------

def iso(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None


def describe(r):
    v = {
        "CapacityReservationId": r["id"], "OwnerId": "123456789012",
        "InstanceType": r["instance_type"], "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": r["zone"], "Tenancy": "default",
        "TotalInstanceCount": r["total"], "AvailableInstanceCount": max(0, r["total"] - len(r["instances"]) - r["held"]),
        "State": r["state"], "InstanceMatchCriteria": "targeted",
        "ReservationType": r["type"],
        "EndDateType": "limited" if r.get("end") else "unlimited",
    }
    if r.get("start"):
        v["StartDate"] = iso(r["start"])
    if r.get("end"):
        v["EndDate"] = iso(r["end"])
    return v


def describe_reservations(q):
    ids = q.get("CapacityReservationIds") or sorted(reservations)
    missing = [i for i in ids if i not in reservations]
    if missing:
        raise Refusal("InvalidCapacityReservationId.NotFound",
                      "The capacity reservation ID '%s' does not exist" % missing[0])
    return answer_xml("DescribeCapacityReservations",
                      {"CapacityReservations": [describe(reservations[i]) for i in ids]})


def reservation_for_run(q):
    target = (q.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    rid = target.get("CapacityReservationId")
    if not rid:
        return None
    r = reservations.get(rid)
    if not r:
        raise Refusal("InvalidCapacityReservationId.NotFound",
                      "The capacity reservation ID '%s' does not exist" % rid)
    if r["state"] != "active":
        raise Refusal("InvalidCapacityReservationId.Malformed",
                      "The capacity reservation '%s' is not active (it is %s)" % (rid, r["state"]))
    zone = (q.get("Placement") or {}).get("AvailabilityZone")
    if q.get("InstanceType") != r["instance_type"] or (zone and zone != r["zone"]):
        raise Refusal("InvalidParameterCombination",
                      "The instance type or zone does not match capacity reservation '%s'" % rid)
    market = (q.get("InstanceMarketOptions") or {}).get("MarketType")
    if (market == "capacity-block") != (r["type"] == "capacity-block"):
        raise Refusal("InvalidParameterCombination",
                      "MarketType capacity-block is for Capacity Blocks only, and required for them")
    if q.get("MinCount", 1) > r["total"] - len(r["instances"]) - r["held"]:
        raise Refusal("ReservationCapacityExceeded",
                      "There is not enough capacity in the capacity reservation '%s'" % rid)
    return r


def mark_instances(data):
    """moto's answer with each reserved instance's capacityReservationId."""
    text = data.decode()

    def add(m):
        rid = owner.get(m.group(1))
        if not rid or "<capacityReservationId>" in m.group(0):
            return m.group(0)
        extra = "<capacityReservationId>%s</capacityReservationId>" % rid
        if reservations.get(rid, {}).get("type") == "capacity-block":
            extra += "<instanceLifecycle>capacity-block</instanceLifecycle>"
        return m.group(0) + extra
    return re.sub(r"<instanceId>(i-[0-9a-f]+)</instanceId>", add, text).encode()


# ---- the server ---------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, body, ctype="text/xml"):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _json(self, obj):
        self._reply(200, json.dumps(obj) + "\n", "application/json")

    def _control(self, body):
        arg = json.loads(body or b"{}") if self.command == "POST" else {}
        with lock:
            if self.path == "/__fake/reservation":
                reservations[arg["id"]] = {
                    "id": arg["id"], "instance_type": arg["instance_type"], "zone": arg["zone"],
                    "total": int(arg["total"]), "state": arg.get("state", "active"),
                    "type": arg.get("type", "default"), "start": arg.get("start"),
                    "end": arg.get("end"), "instances": [], "held": 0}
            elif self.path == "/__fake/state":
                reservations[arg["id"]]["state"] = arg["state"]
            elif self.path == "/__fake/full":
                r = reservations[arg["id"]]
                r["held"] = r["total"] - len(r["instances"])
            elif self.path == "/__fake/delay":
                delay[0] = float(arg["seconds"])
            elif self.path == "/__fake/stats":
                return self._json({
                    "violations": stats["violations"], "run_into": stats["run_into"],
                    "actions": stats["actions"],
                    "reservations": {k: {"available": describe(r)["AvailableInstanceCount"],
                                         "instances": r["instances"], "state": r["state"]}
                                     for k, r in reservations.items()}})
            else:
                return self._reply(404, "no such control\n", "text/plain")
        self._json({"ok": True})

    def _forward(self, body, headers):
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        conn.request("POST", self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def _handle(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path.startswith("/__fake/"):
            return self._control(body)
        params = dict(parse_qsl(body.decode(errors="replace"), keep_blank_values=True))
        action = params.get("Action", "?")
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        with lock:
            stats["actions"].append(action)
        try:
            verify_signature(self.headers, self.path, body)
            q = check_request(action, params)
            if action == "DescribeCapacityReservations":
                with lock:
                    return self._reply(200, describe_reservations(q))
            if action == "RunInstances":
                return self._run(q, params, body, headers)
            status, data = self._forward(body, headers)
            if status == 200 and action == "TerminateInstances":
                with lock:
                    # The slot is free again; the instance still names
                    # its reservation, as EC2's listing does.
                    for k, v in params.items():
                        if k.startswith("InstanceId.") and v in owner:
                            r = reservations.get(owner[v])
                            if r and v in r["instances"]:
                                r["instances"].remove(v)
            if status == 200 and action == "DescribeInstances":
                with lock:
                    data = mark_instances(data)
                check_moto_answer(action, data)
            return self._reply(status, data)
        except Refusal as e:
            return self._reply(e.status, ERR.format(code=e.code, msg=e.msg))
        except Violation as e:
            with lock:
                stats["violations"].append(str(e))
            return self._reply(400, ERR.format(code="FakeModelViolation", msg=str(e).replace("<", "&lt;")))

    def _run(self, q, params, body, headers):
        with lock:
            r = reservation_for_run(q)
            if r:
                r["held"] += 1          # the slot, until moto answers
        if not r:
            status, data = self._forward(body, headers)
            return self._reply(status, data)
        try:
            # moto would take any market type for spot: the reservation's
            # instance goes to moto as on-demand, re-signed.
            fwd = [(k, v) for k, v in parse_qsl(body.decode(), keep_blank_values=True)
                   if not k.startswith("InstanceMarketOptions.")]
            new_body = percent_encode_sequence(fwd).encode()
            status, data = self._forward(new_body, resign(self.headers, self.path, new_body))
            if status == 200:
                ids = re.findall(r"<instanceId>(i-[0-9a-f]+)</instanceId>", data.decode())
                with lock:
                    for i in ids:
                        owner[i] = r["id"]
                        r["instances"].append(i)
                    stats["run_into"][r["id"]] = stats["run_into"].get(r["id"], 0) + len(ids)
                    data = mark_instances(data)
                check_moto_answer("RunInstances", data)
        finally:
            with lock:
                r["held"] -= 1
        time.sleep(delay[0])
        return self._reply(status, data)

    do_POST = _handle
    do_GET = _handle


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print("EC2_RESV_FAKE_PORT=%d" % srv.server_address[1], flush=True)
    print("EC2_RESV_FAKE_READY", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
