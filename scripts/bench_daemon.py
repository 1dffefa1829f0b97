"""What the Python benchmark scripts (scripts/bench-*.py) share: one `ferry run` of this
checkout's config/ferry.toml on free loopback ports and a fresh store, stopped by its PID;
its CPU time from /proc; its Prometheus figures. Imported, not run."""

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of process `pid`, in seconds."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def metric(metrics_url, pattern):
    """The sum of the series on `metrics_url` whose line matches `pattern`."""
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if re.match(pattern, line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wait_for(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


@dataclass
class Daemon:
    pid: int
    bootstrap: str
    metrics_url: str


@contextlib.contextmanager
def started(ferry):
    """Runs `ferry run` (the binary `ferry`) until the block ends; yields its Daemon. Its
    log's tail goes to stderr when it does not stop cleanly."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    kafka_port, metrics_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as work:
        env = dict(
            os.environ,
            FERRY__AMQP__LISTEN=f"127.0.0.1:{free_port()}",
            FERRY__KAFKA__LISTEN=f"127.0.0.1:{kafka_port}",
            FERRY__METRICS__LISTEN=f"127.0.0.1:{metrics_port}",
            FERRY__MANAGEMENT__LISTEN="127.0.0.1:0",
            FERRY__STORE__PATH=os.path.join(work, "store"),
            RUST_LOG="warn",
        )
        log_path = os.path.join(work, "ferry.log")
        with open(log_path, "w") as log:
            daemon = subprocess.Popen(
                [ferry, "run", "--config", os.path.join(root, "config/ferry.toml")],
                env=env,
                stdout=log,
                stderr=log,
            )
        try:
            wait_for(kafka_port)
            wait_for(metrics_port)
            yield Daemon(
                daemon.pid,
                f"127.0.0.1:{kafka_port}",
                f"http://127.0.0.1:{metrics_port}/metrics",
            )
        finally:
            daemon.terminate()
            daemon.wait(timeout=30)
            if daemon.returncode not in (0, -15):
                sys.stderr.write(open(log_path).read()[-4000:])
