"""One local client cannot take SHM memory away from the others.

An SHM region is a memfd the daemon sealed (F_SEAL_SHRINK, F_SEAL_GROW,
F_SEAL_SEAL) before any client saw it; its local socket hands the descriptor
to any client it admits. A hostile local process of its own (of the daemons'
user, so in their group too: it can do at least what any member of the group
can) opens regions that transfers are using, and some that nobody uses, and tries
to shrink them to 0, grow them, fallocate past their end and seal them
against writes, over and over, while writes between other regions (and the
attacked ones) run on the same link: every attempt fails with EPERM, both
daemons stay up, every write completes and every byte is where it belongs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

import pytest

import pytest_main
import xferd
from xferd.local_socket import local_socket_for, open_region
from conftest import Regions
from daemons import Cluster
from testlib import WAIT_S, fill, sha

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)
Clients = Dict[str, xferd.Client]
MiB = 1 << 20

# The hostile process: for every (local socket, region) given, opens the
# region over the local socket (the request encoded by hand: it needs no
# xferd package) and tries each resize until stdin closes; prints what each
# attempt got, as JSON. It runs as its own process, as a client would.
HOSTILE = r'''
import errno, fcntl, json, os, select, socket, sys, time
F_ADD_SEALS, F_SEAL_WRITE, F_SEAL_FUTURE_WRITE = 1033, 8, 16
def open_region(path, name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    inner = bytes([0x0a, len(name)]) + name.encode()
    s.send(bytes([0x1a, len(inner)]) + inner)
    _, fds, _, _ = socket.recv_fds(s, 65536, 4)
    s.close()
    return fds[0]
def attempt(call):
    try:
        call()
        return "done"
    except OSError as e:
        return errno.errorcode[e.errno]
targets = [tuple(a.rsplit(":", 1)) for a in sys.argv[1:]]
fds = {name: open_region(path, name) for path, name in targets}
seen, rounds = {}, 0
while True:
    for name, fd in fds.items():
        size = os.fstat(fd).st_size
        for what, call in (
                ("truncate to 0", lambda: os.ftruncate(fd, 0)),
                ("truncate to half", lambda: os.ftruncate(fd, size // 2)),
                ("grow", lambda: os.ftruncate(fd, 2 * size)),
                ("fallocate past the end", lambda: os.posix_fallocate(fd, size, 1 << 20)),
                ("seal against writes", lambda: fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE)),
                ("seal future writes",
                 lambda: fcntl.fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE))):
            seen.setdefault(f"{name}: {what}", set()).add(attempt(call))
            seen.setdefault(f"{name}: size", set()).add(os.fstat(fd).st_size)
    rounds += 1
    if rounds == 1:
        print("attacking", flush=True)
    time.sleep(0.001)  # leave the daemons some CPU on a small host
    if select.select([sys.stdin], [], [], 0)[0] and not sys.stdin.read():
        break
print(json.dumps({"rounds": rounds, "seen": {k: sorted(v) for k, v in seen.items()}}))
'''


def hostile(targets: List[str]) -> "subprocess.Popen[str]":
    """Starts the hostile process on `targets` ("socket:region") and returns
    once it has tried everything on each of them once."""
    proc = subprocess.Popen(["/usr/bin/python3", "-c", HOSTILE, *targets],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    started = proc.stdout.readline()
    assert started == "attacking\n", (started, proc.stderr.read() if proc.stderr else "")
    return proc


def local(client: xferd.Client) -> str:
    path = local_socket_for(client.target)
    assert path is not None
    return path


def test_seals_refuse_every_resize_while_other_writes_run(
        cluster: Cluster, clients: Clients, regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    size = 32 * MiB
    src = regions.make("a", "src", size)
    dst = regions.make("b", "dst", size, remote_write=True)
    victim_src = regions.make("a", "victim_src", 4 * MiB)
    victim_dst = regions.make("b", "victim_dst", 4 * MiB, remote_write=True)
    victim_bytes = sha(fill(victim_src, seed=5))
    attacker = hostile([f"{local(a)}:victim_src", f"{local(b)}:victim_dst",
                        f"{local(a)}:src", f"{local(b)}:dst"])
    try:
        # Writes on the link under attack: 32 MiB in 256 KiB slices, eight
        # times, each with other bytes, each checked byte for byte.
        for seed in range(8):
            expected = sha(fill(src, seed=100 + seed))
            done = a.write("src", "b", "dst", size, slice_size=256 << 10).wait(WAIT_S)
            assert done.state == "done", done
            assert sha(dst.buffer) == expected, f"write {seed}: dst differs from src"
    finally:
        out, err = attacker.communicate("", timeout=WAIT_S)
    assert attacker.returncode == 0, err
    report: Dict[str, Any] = json.loads(out)
    assert report["rounds"] >= 2, "the attack did not outlast the writes' start"
    print(f"hostile process: {report['rounds']} rounds of 6 attempts on each of 4 regions "
          f"during 8 writes of {size >> 20} MiB; every attempt EPERM")
    for region, region_size in (("victim_src", 4 * MiB), ("victim_dst", 4 * MiB),
                                ("src", size), ("dst", size)):
        seen = report["seen"]
        for what in ("truncate to 0", "truncate to half", "grow", "fallocate past the end",
                     "seal against writes", "seal future writes"):
            assert seen[f"{region}: {what}"] == ["EPERM"], (region, what, seen)
        assert seen[f"{region}: size"] == [region_size], (region, seen)
    # Both daemons are up, and the attacked regions still work end to end.
    for name in DAEMONS:
        assert cluster[name].proc is not None and cluster[name].proc.poll() is None, name
        assert clients[name].node_info().node_id == name
    assert a.write("victim_src", "b", "victim_dst", 4 * MiB).wait(WAIT_S).state == "done"
    assert sha(victim_dst.buffer) == victim_bytes


def test_open_region_errors_name_the_region(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    regions.make("a", "anon", MiB, backing="anonymous")
    with pytest.raises(xferd.NotFound, match="no region 'missing' on this daemon"):
        open_region(local(a), "missing")
    with pytest.raises(xferd.FailedPrecondition,
                       match="region 'anon' is anonymous-backed: only shm regions"):
        open_region(local(a), "anon")
    with pytest.raises(xferd.InvalidArgument, match="open_region names no region"):
        open_region(local(a), "")


def test_a_client_maps_the_same_memory_the_daemon_moves(
        clients: Clients, regions: Regions) -> None:
    # Two clients of one daemon (the test's, and a descriptor opened
    # directly) see each other's bytes: one memory, however it is opened.
    a = clients["a"]
    region = regions.make("a", "shared", MiB)
    fd, size, _, _ = open_region(local(a), "shared")
    try:
        assert size == MiB and os.fstat(fd).st_size == MiB
        message = b"from the other client"
        os.pwrite(fd, message, 4096)
        assert bytes(region.buffer[4096:4096 + len(message)]) == message
    finally:
        os.close(fd)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
