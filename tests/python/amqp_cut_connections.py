"""Connections cut at every stage of a pika session: through a proxy (in this script) that
forwards the first N bytes the client sends and then closes both sides, as a failing load
balancer or NAT does, for N across the protocol header, the handshake, channel.open, a
declare, a publish with confirm and a get. Prints, per N, the step the client reached and
how long it took to see the cut, as JSON. The test runs it against Ferry and against the
test suite's RabbitMQ node, requires every cut to be seen promptly, and the same steps on
both.

    python3 amqp_cut_connections.py HOST PORT HEARTBEAT_S
"""
import json
import socket
import sys
import threading
import time

import pika

host, port, heartbeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
# Client bytes after which the proxy cuts; the last is past the whole session.
CUTS = [0, 3, 8, 20, 60, 120, 200, 280, 340, 360, 370, 380, 390, 400, 410, 420, 440, 460,
        480, 500, 520, 540, 560, 580, 600, 100000]


class CutProxy(threading.Thread):
    """Accepts one client, connects it to the server, forwards everything the server sends
    and the first `limit` bytes the client sends, then closes both sockets."""

    def __init__(self, limit):
        super().__init__(daemon=True)
        self.limit = limit
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]

    def run(self):
        client, _ = self.listener.accept()
        server = socket.create_connection((host, port))
        done = threading.Event()

        def downstream():
            try:
                while not done.is_set():
                    data = server.recv(65536)
                    if not data:
                        break
                    client.sendall(data)
            except OSError:
                pass
            done.set()

        threading.Thread(target=downstream, daemon=True).start()
        sent = 0
        try:
            while not done.is_set():
                if sent >= self.limit:
                    break
                data = client.recv(self.limit - sent)
                if not data:
                    break
                server.sendall(data)
                sent += len(data)
        except OSError:
            pass
        done.set()
        for s in (client, server, self.listener):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


def session(proxy_port):
    """Runs the session's steps; returns the last step begun."""
    step = "connect"
    parameters = pika.ConnectionParameters(
        "127.0.0.1", proxy_port, "/", pika.PlainCredentials("guest", "guest"),
        heartbeat=heartbeat, socket_timeout=10, blocked_connection_timeout=10,
        connection_attempts=1, stack_timeout=15)
    try:
        connection = pika.BlockingConnection(parameters)
        step = "channel"
        ch = connection.channel()
        step = "declare"
        ch.queue_declare("cut-probe", auto_delete=True)
        step = "confirm"
        ch.confirm_delivery()
        step = "publish"
        ch.basic_publish("", "cut-probe", b"x" * 40)
        step = "get"
        ch.basic_get("cut-probe", auto_ack=True)
        step = "done"
        connection.close()
    except Exception:  # noqa: BLE001 - every failure is the cut showing
        pass
    return step


results = []
for limit in CUTS:
    proxy = CutProxy(limit)
    proxy.start()
    started = time.monotonic()
    step = session(proxy.port)
    results.append({"cut_after": limit, "reached": step,
                    "seconds": round(time.monotonic() - started, 1)})
    proxy.join(timeout=5)
print(json.dumps(results))
