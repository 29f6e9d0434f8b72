#!/usr/bin/env python3
"""tests/lib/fault_proxy.py: a loopback proxy in front of moto that injects faults.

    fault_proxy.py UPSTREAM_PORT

Listens on a free 127.0.0.1 port, prints "FAULT_PROXY_PORT=N" then
"FAULT_PROXY_READY", and forwards every request to 127.0.0.1:UPSTREAM_PORT
byte for byte (Host header included, so SigV4 signatures stay valid).

Control (never forwarded):
  POST /__proxy/schedule   body: comma-separated faults applied to the next
                           EC2 requests in order, then pass-through.  Faults:
                             pass         forward
                             throttle     400 RequestLimitExceeded (EC2 XML)
                             503          503 Unavailable (EC2 XML)
                             500html      500 with an HTML body
                             reset        close the connection, nothing forwarded
                             reset_after  forward, then close without answering
                             truncate     forward, answer with the body cut in half
                             capacity     400 InsufficientInstanceCapacity
                             fleet_short  CreateFleet's answer when an instant fleet's
                                          MinTargetCapacity cannot be met: 200, no
                                          instance, one InsufficientInstanceCapacity
                                          error for the first override's type and zone
                           An entry "ACTION:FAULT" (e.g. "CreateFleet:fleet_short")
                           waits for the next request of that action; the
                           requests before it pass.
  POST /__proxy/delay      body "BEFORE,AFTER" (seconds): every RunInstances and
                           CreateFleet waits BEFORE, is forwarded, then its answer
                           is held AFTER, so a client killed meanwhile leaves an
                           instance it never heard of (or none)
  GET  /__proxy/stats      "requests=N faults=M actions=A1,A2,..." since the last reset
  POST /__proxy/reset      forget the schedule, the delays and the counters
"""
import http.client
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

UPSTREAM = int(sys.argv[1])
lock = threading.Lock()
schedule = []
stats = {"requests": 0, "faults": 0, "actions": []}
delay = [0.0, 0.0]
SLOW_ACTIONS = ("RunInstances", "CreateFleet")

ERR = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
       '<Message>{msg}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>')

FLEET_SHORT = ('<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
               '<requestId>fault-proxy</requestId><fleetId>fleet-fault-proxy</fleetId><errorSet><item>'
               '<launchTemplateAndOverrides><overrides><instanceType>{type}</instanceType>'
               '<availabilityZone>{zone}</availabilityZone></overrides></launchTemplateAndOverrides>'
               '<lifecycle>{market}</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode>'
               '<errorMessage>There is not enough capacity to fulfill your request.</errorMessage>'
               '</item></errorSet><fleetInstanceSet/></CreateFleetResponse>')


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _reply(self, code, body, ctype="text/xml"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _control(self, body):
        global schedule
        if self.path == "/__proxy/schedule":
            with lock:
                schedule = [s.strip() for s in body.decode().split(",") if s.strip()]
            self._reply(200, "ok\n", "text/plain")
        elif self.path == "/__proxy/delay":
            before, after = (float(x) for x in body.decode().split(","))
            with lock:
                delay[:] = [before, after]
            self._reply(200, "ok\n", "text/plain")
        elif self.path == "/__proxy/reset":
            with lock:
                schedule = []
                delay[:] = [0.0, 0.0]
                stats.update(requests=0, faults=0, actions=[])
            self._reply(200, "ok\n", "text/plain")
        elif self.path == "/__proxy/stats":
            with lock:
                line = "requests=%d faults=%d actions=%s\n" % (
                    stats["requests"], stats["faults"], ",".join(stats["actions"]))
            self._reply(200, line, "text/plain")
        else:
            self._reply(404, "no such control\n", "text/plain")

    def _forward(self, body):
        conn = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        hdrs = [(k, v) for k, v in resp.getheaders()
                if k.lower() not in ("transfer-encoding", "connection", "content-length")]
        conn.close()
        return resp.status, hdrs, data

    def _handle(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if self.path.startswith("/__proxy/"):
            return self._control(body)
        action = parse_qs(body.decode(errors="replace")).get("Action", ["?"])[0]
        with lock:
            fault = "pass"
            if schedule:
                want, _, f = schedule[0].rpartition(":")
                if not want or want == action:
                    schedule.pop(0)
                    fault = f
            stats["requests"] += 1
            stats["actions"].append(action)
            if fault != "pass":
                stats["faults"] += 1
        if fault == "throttle":
            return self._reply(400, ERR.format(code="RequestLimitExceeded", msg="Request limit exceeded."))
        if fault == "503":
            return self._reply(503, ERR.format(code="Unavailable", msg="The service is unavailable."))
        if fault == "capacity":
            return self._reply(400, ERR.format(code="InsufficientInstanceCapacity",
                                               msg="We currently do not have sufficient capacity."))
        if fault == "fleet_short":
            q = parse_qs(body.decode(errors="replace"))
            first = lambda k: q.get("LaunchTemplateConfigs.1.Overrides.1." + k, [""])[0]
            market = q.get("TargetCapacitySpecification.DefaultTargetCapacityType", ["on-demand"])[0]
            return self._reply(200, FLEET_SHORT.format(type=first("InstanceType"),
                                                       zone=first("AvailabilityZone"), market=market))
        if fault == "500html":
            return self._reply(500, "<html><body>Internal Server Error</body></html>", "text/html")
        if fault == "reset":
            self._reset()
            return
        with lock:
            before, after = delay if action in SLOW_ACTIONS else (0.0, 0.0)
        time.sleep(before)
        status, hdrs, data = self._forward(body)
        time.sleep(after)
        if fault == "reset_after":
            self._reset()
            return
        if fault == "truncate":
            data = data[: len(data) // 2]
        self.send_response(status)
        for k, v in hdrs:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _reset(self):
        # RST rather than FIN: what a dropped connection looks like to curl.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        except OSError:
            pass
        self.close_connection = True
        self.connection.close()

    do_POST = _handle
    do_GET = _handle


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print("FAULT_PROXY_PORT=%d" % srv.server_address[1], flush=True)
    print("FAULT_PROXY_READY", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
