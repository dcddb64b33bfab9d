"""Local access: the unix socket's mode (server.unix_socket_mode, default
0660) decides which local users may talk to the daemon, and its local socket,
which hands out SHM regions' memory, gets the same mode. A client runs as
`nobody` (setpriv) to show the refusal, then as a member of the socket's
group to show that the group decides.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import pytest_main
from daemons import Daemon, daemon_binary
from testlib import WAIT_S

CONNECT = ("import socket, sys\n"
           "s = socket.socket(socket.AF_UNIX)\n"
           "s.connect(sys.argv[1])\n"
           "print('connected')\n")
# Asks the local socket for region "r" (LocalRequest{open_region{region: "r"}},
# encoded by hand: this runs as another user, without the xferd package).
OPEN_REGION = ("import socket, sys\n"
               "s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
               "s.connect(sys.argv[1])\n"
               "s.send(bytes([0x1a, 3, 0x0a, 1]) + b'r')\n"
               "data, fds, _, _ = socket.recv_fds(s, 65536, 4)\n"
               "print('descriptors', len(fds))\n")


def connect_as(uid: int, gid: int, path: str, script: str = CONNECT
               ) -> subprocess.CompletedProcess:
    """Runs `script` (default: connect) on unix socket `path` as uid/gid with
    no supplementary groups."""
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                           "/usr/bin/python3", "-c", script, path],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT_S)


def can_switch_user() -> bool:
    """Root with setpriv, outside a user namespace that lacks uid 65534
    (Bazel's sandbox: hence this test's no-sandbox tag)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true"],
                           stdin=subprocess.DEVNULL, capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not can_switch_user(), reason="acting as another user needs root, setpriv "
                    "and uid 65534 (run outside Bazel's sandbox)")
def test_unix_socket_mode_decides_who_may_connect() -> None:
    # A directory anyone may traverse, so only the socket's own mode decides.
    workdir = tempfile.mkdtemp(prefix="xferd-perm-", dir="/tmp")
    os.chmod(workdir, 0o755)
    d = Daemon("p", workdir, daemon_binary())
    try:
        d.start()
        st = os.stat(d.socket_path)
        assert st.st_mode & 0o777 == 0o660  # server.unix_socket_mode default
        nobody = connect_as(65534, 65534, d.socket_path)
        assert nobody.returncode != 0, nobody.stdout
        assert b"PermissionError" in nobody.stderr, nobody.stderr
        member = connect_as(65534, st.st_gid, d.socket_path)  # the socket's group
        assert member.returncode == 0 and b"connected" in member.stdout, member.stderr
        # The local socket, which hands out SHM regions' memory, alike.
        local = d.socket_path + ".local"
        assert os.stat(local).st_mode & 0o777 == 0o660
        d.client().register_region("r", 4096, backing="shm")
        nobody = connect_as(65534, 65534, local, OPEN_REGION)
        assert b"PermissionError" in nobody.stderr, nobody.stderr
        member = connect_as(65534, st.st_gid, local, OPEN_REGION)
        assert member.returncode == 0 and b"descriptors 1" in member.stdout, member.stderr
        d.client().deregister_region("r")
    finally:
        d.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
