"""Faults on the TCP transport between two daemons in their own network
namespaces, joined by a veth pair (see netns.py): packet loss, delay,
reordering, duplication and corruption (tc netem), a link down and up, a
partition shorter and longer than the lanes' user timeout, the control
plane after a long partition, SIGKILL and restart of a peer, SIGTERM during
transfers on either side, and a full disk under a file-backed region.

Every transfer either completes with every byte verified or fails with a
clear status, none outlives its deadline, and after each test the surviving
daemons hold no more descriptors, lanes, memory registrations or memory
than before it (read from their stats).

Needs root, network namespaces and sch_netem: tests/faults/run.sh runs it
in the Soft-RoCE VM's Debian kernel (the host's may lack netem).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import pytest_main
import xferd
from daemons import Cluster
from netns import NetPair
from testlib import WAIT_S, fill, sha, wait_until

KiB, MiB = 1 << 10, 1 << 20
PORT = 7300  # fixed: a restarted daemon keeps its address, so peers reconnect by themselves
USER_TIMEOUT_S = 4.0
DRAIN_S = 8.0
DISK = 32 * MiB
# 16 Mbit/s (2 MB/s) keeps a 32 MiB transfer in flight for ~16 s: long
# enough to strike it mid-way even in the slow emulated VM.
SLOW = "rate 16mbit"
LONG = 32 * MiB
SLICE = 256 * KiB
SLACK_S = 2.0  # scheduling slack on the (emulated, shared) test machine


@pytest.fixture(scope="module")
def disk() -> Iterator[str]:
    """A 32 MiB tmpfs, mounted before the daemons start so that their mount
    namespaces (made by `ip netns exec`) see it."""
    path = tempfile.mkdtemp(prefix="xferd-disk-")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "xferd-disk", path],
                   check=True, stdin=subprocess.DEVNULL)
    yield path
    subprocess.run(["umount", path], check=True, stdin=subprocess.DEVNULL)
    os.rmdir(path)


@pytest.fixture(scope="module")
def net() -> Iterator[NetPair]:
    with NetPair() as pair:
        yield pair


@pytest.fixture(scope="module")
def cluster(net: NetPair, disk: str) -> Iterator[Cluster]:
    config = (f'[transport]\ntcp_user_timeout = "{USER_TIMEOUT_S:g}s"\n'
              f'[engine]\ndrain_timeout = "{DRAIN_S:g}s"\n')
    each = {side: {"netns": net.ns(side), "host": net.ip(side)} for side in "ab"}
    with Cluster("ab", each=each, port=PORT, slice_size="256KiB", config_extra=config,
                 file_dirs=[disk]) as c:
        c["a"].client().connect_peer(c["b"].address)
        c["b"].client().connect_peer(c["a"].address)
        yield c


_CLIENTS: Dict[Tuple[int, int], xferd.Client] = {}


def client(cluster: Cluster, name: str) -> xferd.Client:
    """One client per daemon process, as an application holds one: each
    client over the unix socket holds a request-ring session (four of the
    daemon's descriptors) until it closes, which the leak checks count."""
    daemon = cluster[name]
    key = (id(cluster), daemon.pid)
    if key not in _CLIENTS:
        _CLIENTS[key] = daemon.client()
    return _CLIENTS[key]


class Regions:
    """Regions a test registers; deregistered (force) after it."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.made: List[tuple] = []

    def make(self, daemon: str, name: str, size: int, **kwargs: object) -> xferd.Region:
        kwargs.setdefault("backing", "shm")
        region = client(self.cluster, daemon).register_region(name, size, **kwargs)
        self.made.append((daemon, name, self.cluster[daemon].pid))
        return region

    def cleanup(self) -> None:
        for daemon, name, pid in reversed(self.made):
            if self.cluster[daemon].pid == pid and self.cluster[daemon].proc.poll() is None:
                try:
                    client(self.cluster, daemon).deregister_region(name, force=True)
                except xferd.NotFound:
                    pass


def resources(c: xferd.Client) -> Dict[str, int]:
    s = c.stats()
    return {"fds": s.open_fds, "lanes": s.open_lanes, "mrs": s.memory_registrations,
            "in_flight": s.transfers_in_flight,
            "memory_beyond_regions_MiB": (s.resident_bytes - s.registered_bytes) >> 20}


def settled(before: Dict[str, int], now: Dict[str, int]) -> bool:
    return (now["fds"] <= before["fds"] and now["lanes"] == before["lanes"]
            and now["mrs"] == before["mrs"] and now["in_flight"] == 0
            and now["memory_beyond_regions_MiB"] <= before["memory_beyond_regions_MiB"] + 32)


def ping(cluster: Cluster, src: str, dst: str, seed: int) -> None:
    """A small write src -> dst, bytes checked: the pair works (reconnecting if
    the link broke; the peer's address did not change)."""
    s = client(cluster, src).register_region("ping_src", 64 * KiB, backing="shm")
    d = client(cluster, dst).register_region("ping_dst", 64 * KiB, backing="shm",
                                              remote_write=True)
    try:
        digest = sha(fill(s, seed))
        client(cluster, src).write("ping_src", dst, "ping_dst", 64 * KiB).wait(WAIT_S)
        assert sha(d.buffer) == digest
    finally:
        client(cluster, src).deregister_region("ping_src")
        client(cluster, dst).deregister_region("ping_dst")


@pytest.fixture
def regions(cluster: Cluster, net: NetPair) -> Iterator[Regions]:
    """Per test: a working pair and a resource baseline before; after, the
    faults removed, the pair working again, nothing leaked."""
    ping(cluster, "a", "b", 1)
    ping(cluster, "b", "a", 2)
    pids = {n: cluster[n].pid for n in "ab"}
    before = {n: resources(client(cluster, n)) for n in "ab"}
    r = Regions(cluster)
    yield r
    net.clear()
    net.link("up")
    r.cleanup()
    ping(cluster, "a", "b", 3)
    ping(cluster, "b", "a", 4)
    for n in "ab":
        if cluster[n].pid != pids[n]:
            continue  # restarted by the test: a new process, a new baseline
        c = client(cluster, n)
        # Up to 30 s: a connection closed during a partition leaves its FIN
        # behind unacknowledged bytes, which TCP retransmits at backed-off
        # intervals (12.8 s apart by then), and the peer holds its end open
        # until it arrives.
        try:
            wait_until(f"{n} back to its resources before the test",
                       lambda: settled(before[n], resources(c)), timeout=30.0)
        except AssertionError:
            raise AssertionError(f"{n} leaks: before {before[n]}, after {resources(c)}") from None


class LongWrite:
    """A write a -> b (LONG bytes by default) on fresh regions, filled before
    it starts: filling is slow in the emulated VM and must not eat into the
    transfer's time."""

    def __init__(self, cluster: Cluster, regions: Regions, seed: int, length: int = LONG) -> None:
        self.cluster = cluster
        self.length = length
        self.src, self.dst = f"long_src{seed}", f"long_dst{seed}"
        source = regions.make("a", self.src, length)
        regions.make("b", self.dst, length, remote_write=True)
        self.digest = sha(fill(source, seed))
        self.handle: Optional[xferd.TransferHandle] = None

    def start(self, **kwargs: object) -> xferd.TransferHandle:
        self.handle = client(self.cluster, "a").write(self.src, "b", self.dst, self.length,
                                                      slice_size=SLICE, **kwargs)
        return self.handle

    def snapshot(self) -> xferd.Transfer:
        assert self.handle is not None
        return client(self.cluster, "a").transfer(self.handle.id)

    def wait_moving(self) -> None:
        """Until bytes move; it must still be running then (the test is void otherwise)."""
        t = wait_until("bytes moving", lambda: (lambda t: t if t.bytes_done > 0 else None)(
            self.snapshot()))
        assert t.state == "running", f"done too soon for the fault to hit it: {t}"

    def landed(self) -> bool:
        return dst_sha(self.cluster, "b", self.dst) == self.digest


def dst_sha(cluster: Cluster, daemon: str, name: str) -> str:
    return sha(client(cluster, daemon).region(name).buffer)


def failure_of(wait: Callable[[], object]) -> tuple:
    """Runs `wait` (a handle's wait); returns (error, seconds it took)."""
    start = time.monotonic()
    with pytest.raises(xferd.XferdError) as failure:
        wait()
    return failure.value, time.monotonic() - start


# ---- tc netem: every byte arrives, whatever the network does ---------------

NETEM = {
    "delay": "delay 20ms 5ms distribution normal",
    "loss": "loss 5%",
    "reorder": "delay 5ms reorder 25% 50%",
    "duplicate": "duplicate 5%",
    "corrupt": "corrupt 2%",  # TCP's checksum drops them; they are retransmitted
    "all": "delay 10ms 2ms loss 2% duplicate 2% corrupt 1% reorder 10%",
}


@pytest.mark.parametrize("kind", NETEM)
def test_netem_both_directions_every_byte(cluster: Cluster, net: NetPair, regions: Regions,
                                          kind: str) -> None:
    size = 4 * MiB + 7  # an odd tail slice
    net.netem(NETEM[kind])
    handles = []
    expected = {}
    for i, (src, dst) in enumerate((("a", "b"), ("b", "a"), ("a", "b"), ("b", "a"))):
        s = regions.make(src, f"n_src{i}", size)
        regions.make(dst, f"n_dst{i}", size, remote_write=True)
        expected[(dst, f"n_dst{i}")] = sha(fill(s, 100 + i))
        handles.append(client(cluster, src).write(f"n_src{i}", dst, f"n_dst{i}", size,
                                                  slice_size=64 * KiB, timeout=60.0))
    start = time.monotonic()
    for h in handles:
        h.wait(90.0)
    took = time.monotonic() - start
    for (dst, name), digest in expected.items():
        assert dst_sha(cluster, dst, name) == digest, f"{kind}: {name} on {dst} differs"
    print(f"\nnetem {NETEM[kind]!r}: 4 x {size / MiB:.0f} MiB, both directions, in "
          f"{took:.1f} s, bytes verified")


# ---- link down and up, partitions ------------------------------------------

def test_link_down_briefly_transfer_completes(cluster: Cluster, net: NetPair,
                                              regions: Regions) -> None:
    write = LongWrite(cluster, regions, seed=11)
    net.netem(SLOW)
    handle = write.start()
    write.wait_moving()
    net.link("down")
    time.sleep(1.0)  # well within the user timeout: TCP retransmits after
    net.link("up")
    assert handle.wait(WAIT_S).bytes_done == LONG
    assert write.landed()
    print("\nlink down 1 s mid-transfer, then up: the transfer completed, bytes verified")


def test_partition_deadline_then_user_timeout_then_heals(cluster: Cluster, net: NetPair,
                                                         regions: Regions) -> None:
    a = client(cluster, "a")
    writes = [LongWrite(cluster, regions, seed=12), LongWrite(cluster, regions, seed=13)]
    s = regions.make("a", "deadline_src", MiB)
    regions.make("b", "deadline_dst", MiB, remote_write=True)
    fill(s, 14)
    net.netem(SLOW)
    handles = [writes[0].start(), writes[1].start(timeout=30.0)]
    # Both: the second may wait its turn while the first fills the lanes
    # (priorities.lane_bytes), queued rather than running.
    for w in writes:
        w.wait_moving()
    net.netem("loss 100%")  # a partition: packets vanish, no reset, no error
    partitioned = time.monotonic()
    assert all(w.snapshot().state == "running" for w in writes)

    # A write with a deadline ends at its deadline, not later.
    err, took = failure_of(lambda: a.write("deadline_src", "b", "deadline_dst", MiB,
                                           timeout=2.0).wait(WAIT_S))
    assert isinstance(err, xferd.DeadlineExceeded), err
    assert took < 2.0 + SLACK_S, f"the deadline of 2 s passed {took:.1f} s ago"
    print(f"\npartition: write with a 2 s deadline failed after {took:.1f} s: {err}")

    # Writes in flight fail once the lanes' user timeout expires, saying so.
    for h in handles:
        err, _ = failure_of(lambda: h.wait(USER_TIMEOUT_S + 3 * SLACK_S))
        assert isinstance(err, xferd.Unavailable), err
        assert "timed out" in err.message or "timeout" in err.message, err.message
    took = time.monotonic() - partitioned
    print(f"partition: writes in flight failed {took:.1f} s in: {err}")
    assert took < USER_TIMEOUT_S + 3 * SLACK_S, f"failed only {took:.1f} s into the partition"
    assert a.stats().transfers_in_flight == 0
    wait_until("the broken link's lanes closed", lambda: a.stats().open_lanes == 0, timeout=5.0)

    # While still partitioned, a write must reconnect first: it fails at its
    # deadline with the reason, without waiting out the reconnect bound.
    start = time.monotonic()
    with pytest.raises(xferd.Unavailable) as refused:
        a.write("deadline_src", "b", "deadline_dst", MiB, timeout=2.0)
    assert time.monotonic() - start < 2.0 + SLACK_S
    assert "disconnected" in refused.value.message, refused.value.message
    print(f"partition: a new write was refused: {refused.value}")

    # Healed: the next write reconnects by itself (same address) and lands.
    net.clear()
    digest = sha(fill(s, 15))
    a.write("deadline_src", "b", "deadline_dst", MiB).wait(WAIT_S)
    assert dst_sha(cluster, "b", "deadline_dst") == digest
    assert next(p for p in a.peers() if p.node_id == "b").state == "connected"
    print("partition healed: the next write reconnected by itself, bytes verified")


def test_control_plane_speaks_at_once_after_a_long_partition(cluster: Cluster, net: NetPair,
                                                              regions: Regions) -> None:
    """A call stranded by a partition leaves bytes unacknowledged on the
    peer's gRPC connection, which TCP retransmits at backed-off intervals
    (from 0.2 s, doubling: 12.6 s, then 25.4 s after it was sent). Kept after
    a heal at 16 s, that connection would next speak about 9 s later, so a
    write with 5 s to resolve its region would fail although the network is
    back. The daemon drops a connection a call timed out on: the write
    connects anew and lands in time."""
    a = client(cluster, "a")
    s = regions.make("a", "stall_src", MiB)
    regions.make("b", "stall_dst", MiB, remote_write=True)
    net.netem("loss 100%")
    try:
        partitioned = time.monotonic()
        err, _ = failure_of(lambda: a.write("stall_src", "b", "stall_dst", MiB,
                                            timeout=2.0).wait(WAIT_S))
        assert isinstance(err, xferd.DeadlineExceeded), err
        time.sleep(max(0.0, partitioned + 16.0 - time.monotonic()))
    finally:
        net.clear()
    digest = sha(fill(s, 16))
    healed = time.monotonic()
    a.write("stall_src", "b", "stall_dst", MiB, timeout=5.0).wait(WAIT_S)
    took = time.monotonic() - healed
    assert dst_sha(cluster, "b", "stall_dst") == digest
    print(f"\nheal after 16 s of partition: the next write resolved and landed in {took:.1f} s, "
          "bytes verified")


# ---- process faults ---------------------------------------------------------

def test_receiver_sigkill_and_restart(cluster: Cluster, net: NetPair, regions: Regions) -> None:
    a = client(cluster, "a")
    net.netem(SLOW)
    for cycle in range(2):
        write = LongWrite(cluster, regions, seed=20 + cycle)
        handle = write.start()
        write.wait_moving()
        killed = time.monotonic()
        cluster["b"].kill()
        err, _ = failure_of(lambda: handle.wait(WAIT_S))
        took = time.monotonic() - killed
        assert isinstance(err, xferd.Unavailable) and err.message, err
        assert took < 2.0, f"the sender noticed the dead receiver after {took:.1f} s"
        assert 0 < err.transfer.bytes_done < LONG
        print(f"\nSIGKILL of the receiver: the write failed after {took:.2f} s: {err}")
        assert a.stats().transfers_in_flight == 0
        cluster["b"].start()  # same address; its regions are gone with the process
        client(cluster, "b").connect_peer(cluster["a"].address)
        ping(cluster, "a", "b", 30 + cycle)  # a reconnects by itself


@pytest.mark.parametrize("case", ["sender_finishes", "sender_drain_timeout", "receiver"])
def test_sigterm_during_transfer(cluster: Cluster, net: NetPair, regions: Regions,
                                 case: str) -> None:
    # 4 MiB (2 s at SLOW) ends within the drain; LONG (16 s) cannot.
    write = LongWrite(cluster, regions, seed=40,
                      length=4 * MiB if case == "sender_finishes" else LONG)
    net.netem(SLOW)
    handle = write.start()
    write.wait_moving()
    outcome: List[object] = []

    def wait() -> None:
        try:
            outcome.append(handle.wait(WAIT_S))
        except xferd.XferdError as e:
            outcome.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    victim, survivor = (cluster["b"], cluster["a"]) if case == "receiver" else (cluster["a"],
                                                                                cluster["b"])
    start = time.monotonic()
    victim.terminate()
    waiter.join(WAIT_S)
    victim.wait_stopped()  # exit code 0, nothing left behind
    took = time.monotonic() - start
    result = outcome[0]
    if case == "sender_finishes":
        assert isinstance(result, xferd.Transfer) and result.state == "done", result
        assert write.landed()
        assert took < DRAIN_S, f"stopped {took:.1f} s after SIGTERM: the drain should end " \
                               "with the last transfer"
    else:
        assert isinstance(result, xferd.Unavailable), result
        expect = "drain_timeout" if case == "sender_drain_timeout" else "went away"
        assert expect in result.message, result.message
        assert took < DRAIN_S + 2 * SLACK_S, f"{victim.name} took {took:.1f} s to stop"
    print(f"\nSIGTERM ({case}): stopped in {took:.1f} s, exit 0; the "
          f"{write.length >> 20} MiB write: {getattr(result, 'state', result)}")

    wait_until("the survivor closed the leaving daemon's lanes",
               lambda: survivor.client().stats().open_lanes == 0, timeout=5.0)
    assert survivor.client().stats().transfers_in_flight == 0
    victim.start()
    victim.client().connect_peer(survivor.address)


# ---- a full disk under a file-backed region ---------------------------------

def test_full_disk_under_file_region(cluster: Cluster, disk: str, regions: Regions) -> None:
    b = client(cluster, "b")
    # Too big for the disk: refused at registration, nothing left behind.
    too_big = os.path.join(disk, "too_big")
    with pytest.raises(xferd.ResourceExhausted) as refused:
        b.register_region("too_big", 2 * DISK, backing="file", file_path=too_big, create=True,
                          remote_write=True)
    assert "cannot reserve" in refused.value.message, refused.value.message
    assert not os.path.exists(too_big), "the file it created for the region is removed"
    print(f"\nfull disk: a region larger than the disk: {refused.value}")

    # A region that fits reserves its blocks: filling the disk afterwards
    # cannot take them away, and writes into it land.
    path = os.path.join(disk, "landing")
    size = 8 * MiB
    regions.make("b", "landing", size, backing="file", file_path=path, create=True,
                 remote_write=True)
    filler = os.path.join(disk, "filler")
    with open(filler, "wb") as f:
        with pytest.raises(OSError) as full:
            while True:
                f.write(b"\xff" * MiB)
                f.flush()
    assert full.value.errno == errno.ENOSPC
    try:
        src = regions.make("a", "disk_src", size)
        digest = sha(fill(src, 50))
        client(cluster, "a").write("disk_src", "b", "landing", size).wait(WAIT_S)
        with open(path, "rb") as f:
            assert sha(f.read()) == digest

        # Now a new file region cannot get space: a clear error, not a SIGBUS later.
        with pytest.raises(xferd.ResourceExhausted) as no_space:
            b.register_region("late", MiB, backing="file", file_path=os.path.join(disk, "late"),
                              create=True, remote_write=True)
        assert "No space left" in no_space.value.message, no_space.value.message
        assert not os.path.exists(os.path.join(disk, "late"))
        print("full disk: a write into a region registered before the disk filled: "
              f"bytes verified; a new region: {no_space.value}")
    finally:
        os.unlink(filler)


def test_wildcard_data_listen_is_dialed_at_the_grpc_host(net: NetPair) -> None:
    """Daemons whose data lanes listen on 0.0.0.0 without tcp_advertise_host
    advertise no data host: each dials the other's lanes at the host its gRPC
    service answered on, not its own loopback (which only works when both
    run on one host), and bytes arrive both ways."""
    each = {side: {"netns": net.ns(side), "host": net.ip(side), "data_host": "0.0.0.0"}
            for side in "ab"}
    with Cluster("ab", each=each, port=PORT + 1, slice_size="256KiB") as c:
        for src, dst, seed in (("a", "b", 60), ("b", "a", 61)):
            c[src].client().connect_peer(c[dst].address)
            s = c[src].client().register_region("wild_src", MiB, backing="shm")
            d = c[dst].client().register_region("wild_dst", MiB, backing="shm",
                                                remote_write=True)
            digest = sha(fill(s, seed))
            c[src].client().write("wild_src", dst, "wild_dst", MiB).wait(WAIT_S)
            assert sha(d.buffer) == digest
        print(f"\nwildcard data listen: lanes dialed at {net.ip('a')} and {net.ip('b')}, "
              "bytes verified both ways")


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
