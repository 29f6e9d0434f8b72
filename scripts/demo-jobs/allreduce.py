"""Two or more nodes meeting through TARMAC_MASTER_ADDR/PORT: every rank
sends its gradient vector to rank 0, rank 0 sums them and sends the sum
back with every rank's part, and every rank prints what it sent and
received (a hand-written
all-reduce, what NCCL or Gloo would do for a real framework).  Then a few
"steps" of SECONDS in all, so the GPUs are busy for a while."""
import json
import os
import socket
import sys
import time

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10
rank, n = int(os.environ["TARMAC_NODE_RANK"]), int(os.environ["TARMAC_NUM_NODES"])
addr, port = os.environ["TARMAC_MASTER_ADDR"], int(os.environ["TARMAC_MASTER_PORT"])
grad = [round((rank + 1) * 0.5 * (i + 1), 2) for i in range(4)]
print("allreduce: rank %d of %d, master %s:%d, nodes %s, %s GPUs per node"
      % (rank, n, addr, port, os.environ["TARMAC_NODE_ADDRS"], os.environ["TARMAC_GPUS_PER_NODE"]),
      flush=True)


def recv_json(sock):
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit("allreduce: rank %d: peer closed early" % rank)
        buf += chunk
    return json.loads(buf)


if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(n)
    srv.settimeout(60)
    peers = []
    for _ in range(n - 1):
        conn, _ = srv.accept()
        msg = recv_json(conn)
        peers.append((conn, msg))
        print("allreduce: rank 0 received rank %d's gradient %s" % (msg["rank"], msg["grad"]), flush=True)
    total = [sum(v) for v in zip(grad, *[m["grad"] for _, m in peers])]
    parts = {0: grad}
    parts.update({m["rank"]: m["grad"] for _, m in peers})
    for conn, _ in peers:
        conn.sendall((json.dumps({"sum": total, "parts": parts}) + "\n").encode())
        conn.close()
else:
    end = time.time() + 60
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > end:
                raise
            time.sleep(0.2)
    c.sendall((json.dumps({"rank": rank, "grad": grad}) + "\n").encode())
    reply = recv_json(c)
    total, parts = reply["sum"], {int(r): g for r, g in reply["parts"].items()}
print("allreduce: rank %d sent %s, received the sum %s = %s" % (
    rank, grad, total, " + ".join("rank %d's %s" % (r, parts[r]) for r in sorted(parts))), flush=True)
for step in range(1, 6):
    time.sleep(secs / 5)
print("allreduce: rank %d done, 5 steps" % rank, flush=True)
