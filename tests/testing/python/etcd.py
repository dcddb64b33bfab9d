"""Starts and stops a real etcd (Debian's etcd-server) for the cluster tests.

One member on free loopback ports, or a cluster of three (EtcdCluster), each
member's data in a temporary directory; stopped by the pid this module started
(SIGTERM, then SIGKILL), never by name. etcd cannot bind port 0, so the ports
are picked free just before it starts and a start that loses the race is
retried on others.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Dict, List, Optional, Tuple

__all__ = ["Etcd", "EtcdCluster", "etcd_binary"]

_READY_TIMEOUT_S = 20.0
_ATTEMPTS = 3


def etcd_binary() -> str:
    """/usr/bin/etcd, or $ETCD_BIN; Debian's etcd-server installs it."""
    path = os.environ.get("ETCD_BIN", "/usr/bin/etcd")
    if not os.path.exists(path):
        raise RuntimeError(f"{path} not found: apt-get install etcd-server etcd-client "
                           "(deploy/install-deps.sh test installs them)")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Etcd:
    """One etcd member. `endpoint` ("127.0.0.1:port") is its client address.

    With `tls` (CA, certificate, key: PEM paths) it serves clients over TLS
    and requires a client certificate from that CA.
    """

    def __init__(self, name: str = "etcd", tls: Optional[Tuple[str, str, str]] = None) -> None:
        base = os.environ.get("TEST_TMPDIR") or tempfile.gettempdir()
        self.dir = tempfile.mkdtemp(prefix="etcd-", dir=base)
        self.name = name
        self.tls = tls
        self.proc: Optional[subprocess.Popen] = None
        self.client_port = 0
        self.peer_port = 0
        # "name=http://127.0.0.1:port,...": the members of its cluster (set
        # by EtcdCluster); empty: a cluster of one.
        self.initial_cluster = ""

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> "Etcd":
        """Runs etcd (on the same ports and data after a stop) and waits until it answers."""
        for attempt in range(_ATTEMPTS):
            if not self.client_port or attempt > 0:
                self.client_port, self.peer_port = _free_port(), _free_port()
            self.launch()
            if self.wait_ready():
                return self
            self.stop()
        raise AssertionError(f"etcd did not start; its log:\n{self.log_tail()}")

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def launch(self) -> None:
        """Runs etcd on its ports, without waiting (a cluster's members wait for each other)."""
        scheme = "https" if self.tls else "http"
        client = f"{scheme}://127.0.0.1:{self.client_port}"
        log = open(os.path.join(self.dir, "etcd.log"), "ab")
        self.proc = subprocess.Popen(
            [etcd_binary(), "--name", self.name, "--data-dir", os.path.join(self.dir, "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
             "--initial-cluster", self.initial_cluster or f"{self.name}={self.peer_url}",
             *self._tls_args()],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_ready(self) -> bool:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline and self.proc is not None and self.proc.poll() is None:
            if self.ctl("endpoint", "health", check=False).returncode == 0:
                return True
            time.sleep(0.1)
        return False

    def _tls_args(self) -> List[str]:
        if not self.tls:
            return []
        ca, cert, key = self.tls
        return ["--trusted-ca-file", ca, "--cert-file", cert, "--key-file", key,
                "--client-cert-auth"]

    def stop(self) -> None:
        """SIGTERM to the pid started here (SIGKILL after 10 s); keeps the data."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL to the pid started here: a member that dies without a word."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def revision(self) -> int:
        """The store's current revision, as this member reports it."""
        out = self.ctl("get", "/", "-w", "json").stdout
        return int(json.loads(out)["header"]["revision"])

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """etcdctl (API v3) against this member."""
        env = dict(os.environ, ETCDCTL_API="3")
        tls = []
        if self.tls:
            ca, cert, key = self.tls
            tls = ["--cacert", ca, "--cert", cert, "--key", key]
        return subprocess.run(["etcdctl", "--endpoints", self.endpoint, *tls,
                               "--dial-timeout", "2s", "--command-timeout", "3s", *args],
                              env=env, capture_output=True, text=True, check=check)

    def get_prefix(self, prefix: str) -> Dict[str, str]:
        """Every key under `prefix` and its value."""
        out = self.ctl("get", "--prefix", prefix, "-w", "json").stdout
        kvs: List[dict] = json.loads(out).get("kvs", [])
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv["value"]).decode()
                for kv in kvs}

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self.dir, "etcd.log"), "rb") as f:
                return f.read()[-3000:].decode(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> "Etcd":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class EtcdCluster:
    """Three etcd members on loopback, one cluster. `endpoints` lists their
    client addresses; `leader()` is the member that leads now."""

    def __init__(self, size: int = 3) -> None:
        self.members = [Etcd(f"m{i}") for i in range(size)]

    @property
    def endpoints(self) -> List[str]:
        return [m.endpoint for m in self.members]

    def start(self) -> "EtcdCluster":
        for m in self.members:
            m.client_port, m.peer_port = _free_port(), _free_port()
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial
            m.launch()
        for m in self.members:
            if not m.wait_ready():
                logs = "\n".join(f"--- {x.name}:\n{x.log_tail()}" for x in self.members)
                self.close()
                raise AssertionError(f"etcd cluster did not start; the logs:\n{logs}")
        return self

    def leader(self) -> Etcd:
        """The member whose status names itself as leader (asked of a live member)."""
        for m in self.members:
            if m.proc is None or m.proc.poll() is not None:
                continue
            out = m.ctl("endpoint", "status", "-w", "json", check=False)
            if out.returncode != 0:
                continue
            status = json.loads(out.stdout)[0]["Status"]
            if status["header"]["member_id"] == status["leader"]:
                return m
        raise AssertionError("no etcd member says it leads")

    def live(self) -> Etcd:
        """A member still running."""
        return next(m for m in self.members if m.proc is not None and m.proc.poll() is None)

    def close(self) -> None:
        for m in self.members:
            m.close()

    def __enter__(self) -> "EtcdCluster":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
