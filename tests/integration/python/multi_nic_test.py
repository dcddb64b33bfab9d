"""Several RDMA devices per daemon (transport.verbs_devices), in the
Soft-RoCE VM. tests/softroce/rxe_wire.sh lays two veth "cables": rxe1 and
rxe2 on the ends of cable 1, rxe3 and rxe4 on cable 2; suite_guest.sh then
runs this with XFERD_RXE_WIRE set to that script. Daemon a drives rxe1 and
rxe3, b rxe2 and rxe4, c only rxe2. Pairing is by index, so a's rxe1 joins
b's and c's rxe2 over cable 1, and a's rxe3 joins b's rxe4 over cable 2.

Checked: a transfer's slices and a many-block transfer's blocks are striped
over both devices (each carries >= 30% of the bytes); a daemon with two
devices and one with one exchange data both ways. Failover, made to happen:
in the middle of two writes, cable 2 stops carrying rxe3's packets (tc
netem), so the ops posted there can no longer complete; then the cable is
pulled (c2a down). The ops held on rxe3 move to rxe1 and are counted as
failovers (required > 0), and both writes complete with every byte in
place. A transfer running while the cable comes back completes, both ends
rejoin, and the same link (no reconnect) stripes over both devices again.
Every byte is checked by sha256. Without XFERD_RXE_WIRE the module is
skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Iterator, List

import pytest

import pytest_main
import xferd
from daemons import Cluster
from testlib import WAIT_S, fill, sha, wait_until

MiB = 1 << 20
KiB = 1 << 10

WIRE = os.environ.get("XFERD_RXE_WIRE", "")
pytestmark = pytest.mark.skipif(
    not WIRE, reason="needs the Soft-RoCE devices of tests/softroce/rxe_wire.sh: "
    "run by tests/softroce/suite_guest.sh")

# a's queue pairs retry for about 17 s (4 tries of 4.3 s) before they
# give up: long enough that ops held on the cable are moved by the port
# going down, not by their own timeout.
A_DEVICES = '[transport]\nverbs_devices = ["rxe1", "rxe3"]\nverbs_qp_timeout = 20\n'
B_DEVICES = '[transport]\nverbs_devices = ["rxe2", "rxe4"]\n'
C_DEVICE = '[transport]\nverbs_devices = ["rxe2"]\n'


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    each: Dict[str, Dict[str, object]] = {"a": {"config_extra": A_DEVICES},
                                          "b": {"config_extra": B_DEVICES},
                                          "c": {"config_extra": C_DEVICE}}
    with Cluster(("a", "b", "c"), each=each, transport="verbs") as c:
        c["a"].client().connect_peer(c["b"].address)
        c["a"].client().connect_peer(c["c"].address)
        yield c


@pytest.fixture(scope="module")
def clients(cluster: Cluster) -> Dict[str, xferd.Client]:
    return {name: cluster[name].client() for name in ("a", "b", "c")}


def device_bytes(client: xferd.Client) -> Dict[str, int]:
    """Bytes sent per device (writes that completed on it)."""
    return {d.name: d.bytes_sent for d in client.stats().devices}


def split(before: Dict[str, int], after: Dict[str, int]) -> Dict[str, int]:
    return {name: after[name] - before.get(name, 0) for name in after}


def assert_striped(moved: Dict[str, int], total: int) -> None:
    assert sum(moved.values()) >= total, moved
    for name, count in moved.items():
        assert count >= 0.3 * total, f"{name} carried {count} of {total} bytes: {moved}"


def test_devices_are_reported(clients: Dict[str, xferd.Client]) -> None:
    stats = clients["a"].stats()
    assert [(d.name, d.up) for d in stats.devices] == [("rxe1", True), ("rxe3", True)]
    # The notice rings of a's links to b hold memory windows on both devices.
    assert all(0 < d.memory_windows <= d.max_memory_windows for d in stats.devices), stats
    assert [d.name for d in clients["c"].stats().devices] == ["rxe2"]
    driven = [d for d in clients["a"].devices() if d.in_use]
    assert [d.name for d in driven] == ["rxe1", "rxe3"]
    assert all(d.stats is not None for d in driven)
    info = clients["a"].node_info()
    assert "rxe1" in info.device and "rxe3" in info.device, info.device


def test_a_transfer_is_striped_over_both_devices(clients: Dict[str, xferd.Client]) -> None:
    a, b = clients["a"], clients["b"]
    size = 64 * MiB
    src = a.register_region("stripe_src", size, backing="shm")
    dst = b.register_region("stripe_dst", size, backing="shm", remote_write=True)
    try:
        data = fill(src, seed=101)
        before = device_bytes(a)
        done = a.write("stripe_src", "b", "stripe_dst", size).wait(WAIT_S)
        assert done.transport == "verbs"
        assert sha(dst.buffer) == sha(data)
        moved = split(before, device_bytes(a))
        print(f"contiguous 64 MiB write, bytes per device: {moved}")
        assert_striped(moved, size)

        # Many blocks in one transfer: 1024 blocks of 32 KiB, scattered.
        before = device_bytes(a)
        runs = xferd.Strided(0, 0, 32 * KiB, 64 * KiB, 64 * KiB, 512)
        done = a.write_strided("stripe_src", "b", "stripe_dst", runs).wait(WAIT_S)
        moved = split(before, device_bytes(a))
        print(f"strided write of 512 blocks, bytes per device: {moved}")
        assert_striped(moved, 512 * 32 * KiB)
        assert sha(dst.buffer) == sha(data)

        # Reads stripe too: pull b's region back into a fresh one.
        back = a.register_region("stripe_back", size, backing="shm")
        try:
            b.deregister_region("stripe_dst")
            dst = b.register_region("stripe_dst", size, backing="shm", remote_read=True,
                                    allowed_peers=["a"])
            dst.buffer[:] = data
            before = {d.name: d.bytes_received for d in a.stats().devices}
            a.read("b", "stripe_dst", "stripe_back", size).wait(WAIT_S)
            after = {d.name: d.bytes_received for d in a.stats().devices}
            moved = split(before, after)
            print(f"64 MiB read, bytes per device: {moved}")
            assert_striped(moved, size)
            assert sha(back.buffer) == sha(data)
        finally:
            a.deregister_region("stripe_back")
    finally:
        a.deregister_region("stripe_src")
        b.deregister_region("stripe_dst")


def test_two_devices_and_one_device_exchange_data(clients: Dict[str, xferd.Client]) -> None:
    a, c = clients["a"], clients["c"]
    size = 16 * MiB
    a_src = a.register_region("mixed_a", size, backing="shm", remote_write=True)
    c_src = c.register_region("mixed_c", size, backing="shm", remote_write=True)
    try:
        there = fill(a_src, seed=7)
        before = device_bytes(a)
        a.write("mixed_a", "c", "mixed_c", size).wait(WAIT_S)
        assert sha(c_src.buffer) == sha(there)
        moved = split(before, device_bytes(a))
        # Index pairing: a's rxe3 has no partner on c.
        assert moved["rxe1"] >= size and moved["rxe3"] == 0, moved
        back = fill(c_src, seed=8)
        c.write("mixed_c", "a", "mixed_a", size).wait(WAIT_S)
        assert sha(a_src.buffer) == sha(back)
    finally:
        a.deregister_region("mixed_a")
        c.deregister_region("mixed_c")


def port_state(device: str) -> str:
    with open(f"/sys/class/infiniband/{device}/ports/1/state") as f:
        return f.read().strip()


def peer_link(client: xferd.Client, node: str) -> xferd.Peer:
    return next(p for p in client.peers() if p.node_id == node)


def device_up(client: xferd.Client, name: str) -> bool:
    return next(d.up for d in client.stats().devices if d.name == name)


def rejoins(client: xferd.Client) -> Dict[str, int]:
    return {d.name: d.rejoins for d in client.stats().devices}


def cable(*command: str) -> None:
    """Acts on c2a, rxe3's end of cable 2."""
    subprocess.run(list(command), check=True)


def test_a_device_going_down_mid_transfer(clients: Dict[str, xferd.Client]) -> None:
    a, b = clients["a"], clients["b"]
    size = 128 * MiB  # a few seconds on Soft-RoCE: time to pull the plug
    src = a.register_region("fail_src", size, backing="shm")
    dst = b.register_region("fail_dst", size, backing="shm", remote_write=True)
    link = peer_link(a, "b").connected_at
    try:
        data = fill(src, seed=202)
        failovers = {d.name: d.failovers for d in a.stats().devices}
        rejoined = {"a": rejoins(a)["rxe3"], "b": rejoins(b)["rxe4"]}
        # Small slices: thousands of ops, striped over both devices.
        before = device_bytes(a)
        handles = [a.write("fail_src", "b", "fail_dst", size, slice_size=64 * KiB)
                   for _ in range(2)]
        wait_until("rxe3 to carry part of the writes",
                   lambda: device_bytes(a)["rxe3"] - before["rxe3"] >= 2 * MiB, period=0.005)
        # The cable stops carrying rxe3's packets: the ops posted on it can
        # no longer complete, and the writes cannot finish without them.
        cable("tc", "qdisc", "replace", "dev", "c2a", "root", "netem", "loss", "100%")
        try:
            held: List[int] = []

            def rxe3_holds_still() -> bool:
                held.append(device_bytes(a)["rxe3"])
                return len(held) >= 2 and held[-1] == held[-2]

            wait_until("rxe3 to stop completing ops", rxe3_holds_still, period=0.5)
            assert not all(h.snapshot().terminal for h in handles), \
                [h.snapshot() for h in handles]
            stats = {d.name: d for d in a.stats().devices}
            assert stats["rxe3"].up and stats["rxe3"].failovers == failovers["rxe3"], stats
            cable("ip", "link", "set", "c2a", "down")
            wait_until("a to see rxe3 down", lambda: not device_up(a, "rxe3"))
            assert "DOWN" in port_state("rxe3")
            for handle in handles:
                done = handle.wait(WAIT_S)
                assert done.state == "done", done
            assert sha(dst.buffer) == sha(data)
            stats = {d.name: d for d in a.stats().devices}
            print(f"after c2a down: {[(d.name, d.up, d.failovers) for d in stats.values()]}")
            # The ops held on rxe3 were flushed when its port went down and
            # carried by rxe1; nothing moved the other way.
            assert stats["rxe3"].failovers > failovers["rxe3"], stats
            assert stats["rxe1"].failovers == failovers["rxe1"], stats
            print(f"ops moved off rxe3: {stats['rxe3'].failovers - failovers['rxe3']}")
            # The link to b lives on, on rxe1 alone.
            dst.buffer[:] = bytes(size)
            before = device_bytes(a)
            a.write("fail_src", "b", "fail_dst", 32 * MiB).wait(WAIT_S)
            moved = split(before, device_bytes(a))
            assert moved["rxe3"] == 0 and moved["rxe1"] >= 32 * MiB, moved
            assert sha(dst.buffer[:32 * MiB]) == sha(data[:32 * MiB])
            # A transfer running while the cable comes back completes.
            dst.buffer[:] = bytes(size)
            handle = a.write("fail_src", "b", "fail_dst", size, slice_size=64 * KiB)
            wait_until("the transfer to be under way",
                       lambda: handle.snapshot().bytes_done >= 2 * MiB, period=0.005)
        finally:
            cable("tc", "qdisc", "del", "dev", "c2a", "root")
            cable("ip", "link", "set", "c2a", "up")
            # Taking c2a down removed the cable's routes and neighbours.
            cable("bash", WIRE, "routes", "2")
        for device in ("rxe3", "rxe4"):
            wait_until(f"{device} to be ACTIVE again", lambda d=device: "ACTIVE" in port_state(d))
        done = handle.wait(WAIT_S)
        assert done.state == "done", done
        assert sha(dst.buffer) == sha(data)
        wait_until("a to see rxe3 up", lambda: all(d.up for d in a.stats().devices))
        # Both ends put their side of the cable's pair back in service.
        for name, client, device in (("a", a, "rxe3"), ("b", b, "rxe4")):
            wait_until(f"{name} to rejoin {device}",
                       lambda c=client, n=name, d=device: rejoins(c)[d] > rejoined[n])
        print(f"rejoins: a {rejoins(a)}, b {rejoins(b)}")
        # The same link, no reconnect, stripes over both devices again. The
        # rejoin counts as soon as a pair is in service; b's keys for a's
        # fresh queue pairs come with the region's next resolution, once
        # the daemons have forgotten the keys of the pairs replaced (after
        # the commit's round trip): a write or two may still go to rxe1.
        assert peer_link(a, "b").connected_at == link
        assert peer_link(a, "b").state == "connected"
        moved: Dict[str, int] = {}

        def striped_again() -> bool:
            dst.buffer[:] = bytes(size)
            before = device_bytes(a)
            a.write("fail_src", "b", "fail_dst", size).wait(WAIT_S)
            assert sha(dst.buffer) == sha(data)
            moved.update(split(before, device_bytes(a)))
            print(f"after c2a up, on the same link, bytes per device: {moved}")
            return all(count >= 0.3 * size for count in moved.values())

        wait_until("a write striped over both devices again", striped_again, period=0)
        assert_striped(moved, size)
        assert peer_link(a, "b").connected_at == link
    finally:
        # With force: a failure above may leave its writes running, and the
        # cleanup must not hide that failure behind its own.
        a.deregister_region("fail_src", force=True)
        b.deregister_region("fail_dst", force=True)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
