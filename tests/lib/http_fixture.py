#!/usr/bin/env python3
"""Loopback HTTP server with canned answers for tests/unit/io/test_http_uv.c.

Binds 127.0.0.1 on a free port, prints "tm-http-fixture port=N" on stdout, then
serves until killed or until its stdin closes (the test process died).

  GET  /ok              200 "ok", x-request-id: req-ok-1
  GET  /slow?ms=N       sleeps N ms, then 200 "slow"
  GET  /status/503      503 with Retry-After: 7 and x-amzn-RequestId: abc-123
  GET  /big?n=N         200 with N bytes of 'x' (default 1 MiB)
  POST /echo            200 echoing the request body
  GET  /reset           closes the connection with a RST, answering nothing
"""
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is exercised

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, body, headers=()):
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/ok":
            self.reply(200, b"ok", [("x-request-id", "req-ok-1")])
        elif url.path == "/slow":
            time.sleep(int(query.get("ms", ["100"])[0]) / 1000.0)
            self.reply(200, b"slow")
        elif url.path.startswith("/status/"):
            code = int(url.path.rsplit("/", 1)[1])
            self.reply(code, b"status", [("Retry-After", "7"), ("x-amzn-RequestId", "abc-123")])
        elif url.path == "/big":
            self.reply(200, b"x" * int(query.get("n", [str(1 << 20)])[0]))
        elif url.path == "/echo":
            self.reply(200, body, [("Content-Type", "application/octet-stream")])
        elif url.path == "/reset":
            # Linger 0 turns close() into a RST: no status line ever goes out.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        else:
            self.reply(404, b"not found")

    do_GET = route
    do_POST = route
    do_PUT = route
    do_DELETE = route

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass  # /reset closed the socket under us


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # 100 clients connect at once

    def handle_error(self, request, client_address):
        pass  # /reset and abandoned clients are expected here


def main():
    server = Server(("127.0.0.1", 0), Handler)
    # A marker, so the test can skip anything a wrapper (pyenv) printed.
    print("tm-http-fixture port=%d" % server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # Exit when the parent goes away, so no server outlives its test.
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
