"""Two xferd "nodes" on one host for the container stage: the DaemonSet's pod
run twice by podman on the host network, at 127.0.0.2 and 127.0.0.3, each with
its own stand-ins for the hostPath volumes, the ConfigMap and the Secret.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import struct
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from pod import Manifest, Pod, podman

IMAGE_GID = 7300  # the image's user and group xferd (deploy/build-image.sh)


@dataclass
class Node:
    name: str             # node name: node id and certificate name
    ip: str               # its loopback "host IP"
    container: str
    dirs: Dict[str, str]  # volume name -> host directory
    user: Optional[str]   # "pod" (the DaemonSet's securityContext) or None (the image's)

    def exec(self, *cmd: str, timeout: float = 120,
             check: bool = True) -> "subprocess.CompletedProcess[str]":
        return podman("exec", self.container, *cmd, timeout=timeout, check=check)

    def xferctl(self, *args: str, timeout: float = 300) -> str:
        return self.exec("xferctl", *args, timeout=timeout).stdout

    def host_path(self, volume: str, name: str) -> str:
        return os.path.join(self.dirs[volume], name)


def make_tls(work: str, nodes: List[Node]) -> str:
    """A CA and, per node, a certificate naming the node and its address, in
    the Secret's layout: ca.pem, <node>.pem, <node>.key."""
    tls = os.path.join(work, "tls-src")
    os.makedirs(tls)

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=tls, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=xferd test CA")
    for n in nodes:
        openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{n.name}.key", "-out", f"{n.name}.csr", "-subj", f"/CN={n.name}")
        with open(os.path.join(tls, f"{n.name}.ext"), "w") as f:
            f.write(f"subjectAltName=DNS:{n.name},IP:{n.ip}\n"
                    "extendedKeyUsage=serverAuth,clientAuth\n")
        openssl("x509", "-req", "-in", f"{n.name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{n.name}.pem",
                "-extfile", f"{n.name}.ext")
    # What the Secret holds: no CA key, no requests.
    for name in os.listdir(tls):
        if not name.endswith((".pem", ".key")) or name == "ca.key":
            os.remove(os.path.join(tls, name))
    return tls


def lay_out(work: str, node: Node, secret: Manifest, config_toml: str) -> None:
    """The node's host directories: hostPaths owned as the kubelet would make
    them (root) or, for the image's own user, by it; the ConfigMap's file; the
    Secret's files, mode 0440 with group fsGroup, as a secret volume has them."""
    owner = 0 if node.user == "pod" else IMAGE_GID
    for volume in ("run", "data"):
        path = os.path.join(work, node.name, volume)
        os.makedirs(path)
        os.chown(path, owner, owner)
        node.dirs[volume] = path
    config = os.path.join(work, node.name, "config")
    os.makedirs(config)
    with open(os.path.join(config, "xferd.toml"), "w") as f:
        f.write(config_toml)
    node.dirs["config"] = config
    tls = os.path.join(work, node.name, "tls")
    os.makedirs(tls)
    for key, value in secret["data"].items():
        path = os.path.join(tls, key)
        with open(path, "wb") as f:
            f.write(base64.b64decode(value))
        os.chown(path, 0, IMAGE_GID)
        os.chmod(path, 0o440)
    node.dirs["tls"] = tls


def with_etcd(config_toml: str, endpoint: str) -> str:
    """The ConfigMap's xferd.toml with the test's etcd as the only endpoint."""
    out, n = re.subn(r"(?m)^etcd = \[.*\]$", f'etcd = ["{endpoint}"]', config_toml)
    assert n == 1, "the ConfigMap's xferd.toml has no [cluster] etcd line"
    return out


def with_registration_cap(config_toml: str, cap: str) -> str:
    """The ConfigMap's xferd.toml with regions.max_registered_bytes set, so
    that the dashboard's registration panel has a cap to draw."""
    out, n = re.subn(r"(?m)^\[regions\]$", f'[regions]\nmax_registered_bytes = "{cap}"',
                     config_toml)
    assert n == 1, "the ConfigMap's xferd.toml has no [regions] table"
    return out


def start(pod: Pod, node: Node, image: str, extra_args: Optional[List[str]] = None) -> None:
    podman(*pod.podman_run(node.container, image, node.name, node.ip, node.dirs,
                           user=node.user, extra_args=extra_args)[1:])


def wait_ready(pod: Pod, node: Node, timeout: float = 60) -> str:
    """Runs the readiness probe until it passes; returns its output."""
    deadline = time.monotonic() + timeout
    while True:
        result = node.exec(*pod.ready, check=False)
        if result.returncode == 0:
            return result.stdout
        state = podman("inspect", "--format", "{{.State.Status}}", node.container).stdout
        if state.strip() != "running" or time.monotonic() > deadline:
            logs = podman("logs", node.container, check=False)
            raise AssertionError(f"{node.container} not ready ({state.strip()}): "
                                 f"{result.stdout}{result.stderr}\n{logs.stdout}{logs.stderr}")
        time.sleep(0.5)


def fill(path: str, size: int, owner: int) -> str:
    """Writes `size` bytes, every MiB different, to `path`; returns their sha256."""
    mib = 1 << 20
    block = bytearray(os.urandom(mib))
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for i in range(size // mib):
            block[:8] = struct.pack("<Q", i)
            f.write(block)
            digest.update(block)
    os.chown(path, owner, owner)
    return digest.hexdigest()


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def capabilities(node: Node) -> str:
    """uid, gid and effective capabilities of the daemon (pid 1 of the container)."""
    status = node.exec("cat", "/proc/1/status").stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return (f"uid {fields['Uid'].split()[0]} gid {fields['Gid'].split()[0]} "
            f"CapEff {fields['CapEff'].strip()}")
