#!/usr/bin/env bash
# Multi-node rendezvous with the local provider (docs/multi-node.md): a
# 3-node job whose ranks find each other through TARMAC_MASTER_ADDR and
# TARMAC_MASTER_PORT (every rank connects to rank 0, rank 0 sums the ranks
# and sends the sum back, every rank checks it), each rank with the same
# node list, hostfile and MASTER_ADDR/MASTER_PORT; a job of one node sees
# rank 0 of 1; the nodes' addresses (127.0.0.1 on the local provider) on
# the API and `tarmac nodes`; an enrollment whose address is not an IP
# address is refused naming the field.
. "$TM_SOURCE_DIR/tests/lib/itest.sh"
. "$TM_SOURCE_DIR/tests/lib/agent_e2e.sh"

# A port range the OS says is free now, on the loopback every node shares.
P=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
E2E_OD_MIN=3
E2E_AGENT_YAML="  rendezvous_port_min: $P
  rendezvous_port_max: $P"
e2e_start itest_agent_rendezvous
T=$WORK/rdv
mkdir -p "$T"
chmod 1777 "$T" # the jobs run under users of their own: a file per process
# Members may start some seconds apart (no start barrier): rank 0 waits
# for its peers and the others retry their connection.
cat >"$T/rdv.py" <<'PY'
import os, socket, sys, time
out = sys.argv[1]
rank, n = int(os.environ["TARMAC_NODE_RANK"]), int(os.environ["TARMAC_NUM_NODES"])
addr, port = os.environ["TARMAC_MASTER_ADDR"], int(os.environ["TARMAC_MASTER_PORT"])
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, port))
    srv.listen(n)
    srv.settimeout(60)
    peers = [srv.accept()[0] for _ in range(n - 1)]
    total = rank + sum(int(p.recv(64).decode()) for p in peers)
    for p in peers:
        p.sendall(str(total).encode())
        p.close()
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
    c.sendall(str(rank).encode())
    total = int(c.recv(64).decode())
ok = "ok" if total == n * (n - 1) // 2 else "bad"
hosts = open(os.environ["TARMAC_HOSTFILE"]).read().replace("\n", ";")
with open("%s/result.%d" % (out, rank), "w") as f:
    f.write(" ".join([ok, str(rank), str(n), str(total), os.environ["TARMAC_GPUS_PER_NODE"],
                      os.environ["TARMAC_NODE_ADDRS"], addr, str(port), os.environ["MASTER_ADDR"],
                      os.environ["MASTER_PORT"], hosts]) + "\n")
PY
wait_for 40 "[ \"\$(psql_q \"SELECT count(*) FROM nodes WHERE state = 'ready'\")\" = 3 ]" || fail "the pool's 3 nodes never came up"

# Every node reported its address at enrollment.
[ "$(psql_q "SELECT string_agg(coalesce(address, '-'), ',') FROM nodes WHERE state = 'ready'")" = "127.0.0.1,127.0.0.1,127.0.0.1" ] \
    || fail "node addresses: $(psql_q "SELECT id, address FROM nodes")"
N1=$(psql_q "SELECT min(id) FROM nodes")
[ "$(api GET "/v1/nodes/$N1" | python3 -c 'import json, sys; print(json.load(sys.stdin)["address"])')" = 127.0.0.1 ] || fail "GET /v1/nodes/$N1 has no address: $(api GET "/v1/nodes/$N1")"
TARMAC_TOKEN=$ADMIN "$TARMAC" nodes --url "$BASE" >"$WORK/nodes.out" 2>&1 || fail "tarmac nodes: $(cat "$WORK/nodes.out")"
head -1 "$WORK/nodes.out" | grep -q ADDRESS && grep -q '127\.0\.0\.1' "$WORK/nodes.out" \
    || fail "tarmac nodes shows no address: $(cat "$WORK/nodes.out")"

J=$(submit "{\"team\":\"vision\",\"gpus\":2,\"nodes\":3,\"pool\":\"od\",\"command\":\"python3 $T/rdv.py $T\"}")
wait_job "$J" succeeded 90
for r in 0 1 2; do
    [ -f "$T/result.$r" ] || fail "rank $r wrote no result: $(ls "$T"); $(psql_q "SELECT state, exit_code, tail FROM jobs WHERE id = $J")"
    read -r ok rank n total gpn addrs maddr mport m2addr m2port hosts <"$T/result.$r"
    [ "$ok $rank $n $total $gpn" = "ok $r 3 3 2" ] || fail "rank $r: $(cat "$T/result.$r")"
    [ "$addrs $maddr $mport $m2addr $m2port" = "127.0.0.1,127.0.0.1,127.0.0.1 127.0.0.1 $P 127.0.0.1 $P" ] \
        || fail "rank $r's rendezvous variables: $(cat "$T/result.$r")"
    [ "$hosts" = "127.0.0.1 slots=2;127.0.0.1 slots=2;127.0.0.1 slots=2;" ] || fail "rank $r's hostfile: $hosts"
done

# A job of one node: rank 0 of 1, the same names.
cat >"$T/single.sh" <<SH
echo "\$TARMAC_NODE_RANK \$TARMAC_NUM_NODES \$TARMAC_NODE_ADDRS \$TARMAC_MASTER_ADDR \$TARMAC_MASTER_PORT \$MASTER_PORT \$(cat "\$TARMAC_HOSTFILE")" >"$T/one.\$\$"
SH
J1=$(submit "{\"team\":\"vision\",\"gpus\":1,\"pool\":\"od\",\"command\":\"sh $T/single.sh\"}")
wait_job "$J1" succeeded 60
[ "$(cat "$T"/one.*)" = "0 1 127.0.0.1 127.0.0.1 $P $P 127.0.0.1 slots=1" ] || fail "the single-node job saw: $(cat "$T"/one.*), want port $P"

# An address that is not an IP address: 400 naming the field, nothing changed.
CODE=$(curl -sS -o "$WORK/enroll.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    --data "{\"node_id\":$N1,\"secret\":\"tme_x\",\"address\":\"node-1.example\"}" "$BASE/v1/agent/enroll")
[ "$CODE" = 400 ] && grep -q '"address"' "$WORK/enroll.out" || fail "a host name as address: $CODE $(cat "$WORK/enroll.out")"
[ "$(psql_q "SELECT address FROM nodes WHERE id = $N1")" = 127.0.0.1 ] || fail "the refused enrollment changed the address"
secrets_absent
echo "1 passed, 0 failed"
