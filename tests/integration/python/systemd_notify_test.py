"""The daemon speaks systemd's notify protocol (Type=notify in the unit):
READY=1 once it serves, WATCHDOG=1 pings at half the watchdog interval,
STOPPING=1 when SIGTERM starts the drain, then exit 0. The test stands in
for systemd: it listens on a NOTIFY_SOCKET datagram socket of its own."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import List

import pytest_main
from daemons import TRANSPORT, daemon_binary
from testlib import WAIT_S

WATCHDOG_USEC = 200_000  # pings expected every 100 ms


def receive_until(sock: socket.socket, want: str, seen: List[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not any(want in m for m in seen):
        left = deadline - time.monotonic()
        assert left > 0, f"no {want} within {timeout} s; got {seen}"
        sock.settimeout(left)
        seen.append(sock.recv(4096).decode())


def test_ready_watchdog_and_stopping() -> None:
    workdir = tempfile.mkdtemp(prefix="xfn", dir="/tmp")
    notify_path = os.path.join(workdir, "notify")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(notify_path)
    config = os.path.join(workdir, "empty.toml")
    open(config, "w").close()
    env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC=str(WATCHDOG_USEC))
    proc = subprocess.Popen(
        [daemon_binary(), "--config", config, "--node-id", "n", "--listen", "127.0.0.1:0",
         "--unix-socket", os.path.join(workdir, "n.sock"), "--transport", TRANSPORT,
         "--data-listen", "127.0.0.1:0"],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        seen: List[str] = []
        receive_until(sock, "READY=1", seen, WAIT_S)
        ready = next(m for m in seen if "READY=1" in m)
        assert "STATUS=serving node n" in ready and f"({TRANSPORT})" in ready, ready
        start, pings = time.monotonic(), 0
        while time.monotonic() - start < 0.6:
            sock.settimeout(1.0)
            pings += sock.recv(4096).decode().count("WATCHDOG=1")
        assert pings >= 3, f"{pings} watchdog pings in 0.6 s with a 200 ms watchdog"
        proc.send_signal(signal.SIGTERM)
        receive_until(sock, "STOPPING=1", seen, WAIT_S)
        assert proc.wait(WAIT_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
        for name in os.listdir(workdir):
            os.unlink(os.path.join(workdir, name))
        os.rmdir(workdir)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
