"""Priority classes over the real API (docs/priorities.md): every transfer
form, over gRPC and the request rings, carries its class to the daemon,
which reports it in the snapshot, the listing and the per-class stats and
metrics; a class the daemon does not know is refused, saying which it
knows. (The order ops reach a lane is shown by the engine's unit tests,
tests/unit/engine/priority_test.cc, and measured by tests/bench/qos_bench.)
Every byte moved is checked by sha256."""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import urllib.request
from typing import Dict

import grpc
import pytest

import pytest_main
import xferd
from xferd.v1 import xferd_pb2
from conftest import Regions
from daemons import Cluster
from testlib import WAIT_S, fill, sha

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)
DAEMON_CONFIG = """
[engine]
poller_slice = "150us"

[priorities]
critical_reserve = 8

[metrics]
listen = "127.0.0.1:0"
"""

KiB = 1 << 10
CLASSES = ("critical", "normal", "bulk", "background")

Clients = Dict[str, xferd.Client]


def counts(client: xferd.Client) -> Dict[str, xferd.PriorityStats]:
    return {p.priority: p for p in client.stats().priorities}


@pytest.mark.parametrize("over", ["rings", "grpc"])
def test_every_form_carries_its_class(cluster: Cluster, clients: Clients, regions: Regions,
                                      over: str) -> None:
    src = regions.make("a", f"pc_src_{over}", 256 * KiB)
    dst = regions.make("b", f"pc_dst_{over}", 256 * KiB, remote_write=True, remote_read=True,
                       allowed_peers=["a"])
    back = regions.make("a", f"pc_back_{over}", 64 * KiB)
    data = fill(src, 11)
    # A unix-socket client sends ranges through the rings; one over TCP
    # sends everything over gRPC.
    client = clients["a"] if over == "rings" else xferd.Client(cluster["a"].address)
    try:
        before = counts(client)
        for i, p in enumerate(CLASSES):
            at = i * 16 * KiB
            t = client.write(src.name, "b", dst.name, 16 * KiB, src_offset=at, dst_offset=at,
                             priority=p).wait(WAIT_S)
            assert (t.state, t.priority) == ("done", p)
            assert client.transfer(t.id).priority == p  # the daemon's own record
        blocks = client.write_blocks(src.name, "b", dst.name, [64 * KiB, 96 * KiB],
                                     [64 * KiB, 96 * KiB], block_length=8 * KiB,
                                     priority="bulk").wait(WAIT_S)
        assert (blocks.state, blocks.priority) == ("done", "bulk")
        strided = client.write_strided(src.name, "b", dst.name,
                                       xferd.Strided(128 * KiB, 128 * KiB, 4 * KiB, 8 * KiB,
                                                     8 * KiB, 16),
                                       priority="critical").wait(WAIT_S)
        assert (strided.state, strided.priority) == ("done", "critical")
        batch = client.submit_batch([
            xferd.WriteSpec(src.name, "b", dst.name, 64 * KiB, src_offset=192 * KiB,
                            dst_offset=192 * KiB, priority="background")])
        assert [h.wait(WAIT_S).priority for h in batch] == ["background"]
        read = client.read("b", dst.name, back.name, 64 * KiB, priority="critical").wait(WAIT_S)
        assert (read.state, read.priority) == ("done", "critical")
        assert sha(back.buffer[:]) == sha(data[:64 * KiB])
        after = counts(client)
    finally:
        if over == "grpc":
            client.close()
    # What landed on b: every range above, and nothing else.
    expected = bytearray(256 * KiB)
    expected[:64 * KiB] = data[:64 * KiB]
    for at in (64 * KiB, 96 * KiB):
        expected[at:at + 8 * KiB] = data[at:at + 8 * KiB]
    for k in range(16):
        at = 128 * KiB + k * 8 * KiB
        expected[at:at + 4 * KiB] = data[at:at + 4 * KiB]
    expected[192 * KiB:] = data[192 * KiB:]
    assert sha(dst.buffer[:]) == sha(bytes(expected))
    # Each class counted what it ran: submitted, done, bytes, a queue wait.
    expect = {"critical": (3, 16 * KiB + 64 * KiB + 64 * KiB), "normal": (1, 16 * KiB),
              "bulk": (2, 16 * KiB + 16 * KiB), "background": (2, 16 * KiB + 64 * KiB)}
    for p, (n, nbytes) in expect.items():
        assert after[p].submitted - before[p].submitted == n, p
        assert after[p].done - before[p].done == n, p
        assert after[p].bytes - before[p].bytes == nbytes, p
        assert after[p].started - before[p].started == n, p
        assert after[p].in_flight == 0, p


def test_default_is_normal(clients: Clients, regions: Regions) -> None:
    src = regions.make("a", "pd_src", 16 * KiB)
    regions.make("b", "pd_dst", 16 * KiB, remote_write=True)
    fill(src, 12)
    t = clients["a"].write("pd_src", "b", "pd_dst", 16 * KiB).wait(WAIT_S)
    assert t.priority == "normal"
    assert clients["a"].transfer(t.id).priority == "normal"


def test_an_unknown_class_is_refused(clients: Clients, regions: Regions) -> None:
    regions.make("a", "pu_src", 16 * KiB)
    regions.make("b", "pu_dst", 16 * KiB, remote_write=True)
    a = clients["a"]
    with pytest.raises(ValueError, match="priority must be one of"):
        a.write("pu_src", "b", "pu_dst", 4 * KiB, priority="urgent")
    request = xferd_pb2.WriteRequest(src_region="pu_src", peer="b", dst_region="pu_dst",
                                     length=4 * KiB, wait=True)
    request.priority = 9  # type: ignore[assignment]  # open enum: a newer client's class
    with pytest.raises(grpc.RpcError) as raised:
        a.stub.Write(request, timeout=WAIT_S)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value
    assert raised.value.details() == (
        "priority 9 is unknown: use PRIORITY_CRITICAL, PRIORITY_NORMAL (the default), "
        "PRIORITY_BULK or PRIORITY_BACKGROUND"), raised.value.details()


def test_the_metrics_count_by_class(cluster: Cluster, clients: Clients,
                                    regions: Regions) -> None:
    src = regions.make("a", "pm_src", 16 * KiB)
    regions.make("b", "pm_dst", 16 * KiB, remote_write=True)
    fill(src, 13)
    clients["a"].write("pm_src", "b", "pm_dst", 16 * KiB, priority="background").wait(WAIT_S)
    url = f"http://{cluster['a'].info['metrics_address']}/metrics"
    with urllib.request.urlopen(url, timeout=WAIT_S) as reply:
        text = reply.read().decode()
    lines = [line for line in text.splitlines()
             if line.startswith('xferd_priority_transfers_total{') and 'background' in line
             and 'outcome="done"' in line]
    assert lines and float(lines[0].rsplit(" ", 1)[1]) >= 1, text


def thread_slice_ns(tid: int) -> int:
    """sched_getattr(2)'s sched_runtime of thread `tid`: its slice under the
    fair scheduler on Linux 6.12 and later, 0 before."""
    attr = ctypes.create_string_buffer(56)  # struct sched_attr, SCHED_ATTR_SIZE_VER1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(315, tid, attr, 56, 0) != 0:  # x86-64's SYS_sched_getattr
        raise OSError(ctypes.get_errno(), f"sched_getattr({tid})")
    return int(struct.unpack_from("<Q", attr.raw, 24)[0])


def test_pollers_run_with_the_configured_slice(cluster: Cluster, clients: Clients,
                                               regions: Regions) -> None:
    major, minor = (int(n) for n in os.uname().release.split(".")[:2])
    if (major, minor) < (6, 12):
        pytest.skip(f"kernel {os.uname().release} keeps no time slice per thread (6.12 does)")
    src = regions.make("a", "ps_src", 64 * KiB)
    dst = regions.make("b", "ps_dst", 64 * KiB, remote_write=True)
    data = fill(src, 17)
    t = clients["a"].write("ps_src", "b", "ps_dst", 64 * KiB, priority="critical").wait(WAIT_S)
    assert t.state == "done"
    assert sha(dst.buffer[:]) == sha(data)
    pid = cluster["a"].pid
    tasks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            tasks[int(tid)] = f.read().strip()
    pollers = [tid for tid, name in tasks.items() if name.startswith("xferd-poll-")]
    assert pollers, tasks
    assert {thread_slice_ns(tid) for tid in pollers} == {150_000}
    # Only the pollers ask: the daemon's other threads keep the default.
    others = [tid for tid, name in tasks.items() if not name.startswith("xferd-poll-")]
    assert 150_000 not in {thread_slice_ns(tid) for tid in others}


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
