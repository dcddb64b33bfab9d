"""The Python clients' request rings against two real daemons: a client over
the unix socket sends writes and reads through the daemon's shared-memory
rings (the daemon logs the session it opened), with the same snapshots and
the same refusals (code and message) as gRPC (reads through the rings are
off by default and turned on here); the asyncio client keeps 64 in flight on the
completion doorbell. Every byte moved is checked with numpy."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable, Dict, List, Tuple

import numpy as np
import pytest

import pytest_main
import xferd
import xferd.aio
import xferd.ring_requests
from conftest import Regions
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, as_array, fill_random

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

KiB = 1 << 10
MiB = 1 << 20


@pytest.fixture(scope="module")
def both(cluster: Cluster) -> Tuple[xferd.Client, xferd.Client]:
    """A ring client and a gRPC-only client on daemon a."""
    ring = cluster["a"].client()
    grpc_only = cluster["a"].client(rings=False)
    return ring, grpc_only


def test_ring_is_used_over_the_unix_socket(cluster: Cluster, regions: Regions,
                                           both: Tuple[xferd.Client, xferd.Client]) -> None:
    ring, grpc_only = both
    data = fill_random(regions.make("a", "used_src", 64 * KiB), seed=1)
    dst = regions.make("b", "used_dst", 64 * KiB, remote_write=True)
    assert not ring.rings_open  # nothing sent yet
    done = ring.write("used_src", "b", "used_dst", 64 * KiB, wait=True).wait(WAIT_S)
    assert ring.rings_open and not grpc_only.rings_open
    assert (done.state, done.bytes_done, done.length) == ("done", 64 * KiB, 64 * KiB)
    np.testing.assert_array_equal(as_array(dst), data)
    with open(cluster["a"].log_path, encoding="utf-8", errors="replace") as log:
        assert "local session" in log.read()
    with xferd.Client(cluster["a"].address) as over_tcp:  # host:port: gRPC only
        over_tcp.write("used_src", "b", "used_dst", KiB, wait=True)
        assert not over_tcp.rings_open


def same_snapshot(a: xferd.Transfer, b: xferd.Transfer) -> None:
    """The fields a ring snapshot and a gRPC one of the same request share
    (ids and times differ)."""
    keys = ("state", "src_region", "src_offset", "peer", "dst_region", "dst_offset", "length",
            "bytes_done", "slice_size", "slices", "transport", "label", "direction", "blocks",
            "error")
    assert {k: getattr(a, k) for k in keys} == {k: getattr(b, k) for k in keys}


def test_ring_and_grpc_give_the_same_transfers(regions: Regions,
                                               both: Tuple[xferd.Client, xferd.Client]
                                               ) -> None:
    ring, grpc_only = both
    size = 256 * KiB
    data = fill_random(regions.make("a", "conf_src", size), seed=2)
    dst = regions.make("b", "conf_dst", size, remote_write=True, remote_read=True)
    back = regions.make("a", "conf_back", size)
    runs: Dict[str, List[xferd.Transfer]] = {"ring": [], "grpc": []}
    offsets = np.arange(0, size, 8 * KiB, dtype=np.uint64)
    small = np.arange(0, 1024 * 128, 128, dtype=np.uint64)
    for name, client in (("ring", ring), ("grpc", grpc_only)):
        as_array(dst)[:] = 0
        as_array(back)[:] = 0
        calls: List[Callable[[], xferd.TransferHandle]] = [
            lambda: client.write("conf_src", "b", "conf_dst", 100 * KiB, src_offset=5,
                                 dst_offset=7, label="x", slice_size=64 * KiB, wait=True),
            lambda: client.write_blocks("conf_src", "b", "conf_dst", offsets, offsets[::-1],
                                        block_length=4 * KiB, wait=True),
            lambda: client.read("b", "conf_dst", "conf_back", size, wait=True),
            # 1,024 blocks with lengths: 24 KiB of arrays, through the buffer area.
            lambda: client.write_blocks("conf_src", "b", "conf_dst", small, small[::-1],
                                        np.full(len(small), 100, dtype=np.uint64), wait=True),
        ]
        sent = client.ring_requests
        for call in calls:
            runs[name].append(call().wait(WAIT_S))
        assert client.ring_requests - sent == (len(calls) if name == "ring" else 0)
        expect = np.zeros(size, dtype=np.uint8)
        expect[7:7 + 100 * KiB] = data[5:5 + 100 * KiB]
        for i, o in enumerate(offsets):
            d = int(offsets[len(offsets) - 1 - i])
            expect[d:d + 4 * KiB] = data[int(o):int(o) + 4 * KiB]
        np.testing.assert_array_equal(as_array(back), expect)  # read before the last write
        d_small = small[::-1].astype(np.int64)[:, None] + np.arange(100)
        expect[d_small.reshape(-1)] = data[(small.astype(np.int64)[:, None]
                                            + np.arange(100)).reshape(-1)]
        np.testing.assert_array_equal(as_array(dst), expect)
    for r, g in zip(runs["ring"], runs["grpc"]):
        same_snapshot(r, g)


def test_verified_transfers_ride_the_ring_when_their_checksums_fit(
        regions: Regions, both: Tuple[xferd.Client, xferd.Client]) -> None:
    ring, grpc_only = both
    size = 1 * MiB
    data = fill_random(regions.make("a", "ver_src", size), seed=4)
    dst = regions.make("b", "ver_dst", size, remote_write=True, remote_read=True)
    back = regions.make("a", "ver_back", size)
    offsets = np.arange(0, 64 * 16 * KiB, 16 * KiB, dtype=np.uint64)
    results: Dict[str, List[xferd.Transfer]] = {}
    for name, client in (("ring", ring), ("grpc", grpc_only)):
        as_array(dst)[:] = 0
        sent = client.ring_requests
        results[name] = [
            # 64 blocks of 16 KiB, the KV-cache shape: 64 checksums, one slot.
            client.write_blocks("ver_src", "b", "ver_dst", offsets, offsets[::-1],
                                block_length=16 * KiB, verify=True, wait=True).wait(WAIT_S),
            client.write("ver_src", "b", "ver_dst", size, slice_size=64 * KiB, verify=True,
                         wait=True).wait(WAIT_S),
        ]
        assert client.ring_requests - sent == (2 if name == "ring" else 0)
        np.testing.assert_array_equal(as_array(dst), data)
    for r, g in zip(results["ring"], results["grpc"]):
        same_snapshot(r, g)
        assert r.verify and g.verify
        assert r.checksums == g.checksums  # the same bytes, the same CRC-64s
    assert len(results["ring"][0].checksums) == 64 * 8
    assert len(results["ring"][1].checksums) == 16 * 8  # one per 64 KiB slice
    # A restore through the ring: checked against the stored checksums.
    stored = results["ring"][1].checksums
    sent = ring.ring_requests
    done = ring.read("b", "ver_dst", "ver_back", size, slice_size=64 * KiB,
                     expected_checksums=stored, wait=True).wait(WAIT_S)
    assert ring.ring_requests - sent == 1
    assert (done.state, done.verify, done.checksums) == ("done", True, stored)
    np.testing.assert_array_equal(as_array(back), data)
    as_array(dst)[5 * 64 * KiB + 3] ^= 0xFF  # altered since: slice 5 differs
    ring_says = refusal(lambda: ring.read("b", "ver_dst", "ver_back", size, slice_size=64 * KiB,
                                          expected_checksums=stored, wait=True).wait(WAIT_S))
    grpc_says = refusal(lambda: grpc_only.read("b", "ver_dst", "ver_back", size,
                                               slice_size=64 * KiB, expected_checksums=stored,
                                               wait=True).wait(WAIT_S))
    assert ring_says == grpc_says and ring_says[:2] == (xferd.DataLoss, "DATA_LOSS"), grpc_says
    assert "block #5 " in ring_says[2] and "1 of 16 blocks differ" in ring_says[2], ring_says
    assert ring.ring_requests - sent == 2
    # More checksums than a completion holds: gRPC carries it, all of them.
    sent = ring.ring_requests
    many = ring.write("ver_src", "b", "ver_dst", size, slice_size=8 * KiB, verify=True,
                      wait=True).wait(WAIT_S)
    assert ring.ring_requests == sent and len(many.checksums) == 128 * 8


def refusal(call: Callable[[], Any]) -> Tuple[type, str, str]:
    with pytest.raises(xferd.XferdError) as e:
        call()
    return type(e.value), e.value.code.name, e.value.message


def test_ring_refuses_as_grpc_does(regions: Regions,
                                   both: Tuple[xferd.Client, xferd.Client]) -> None:
    ring, grpc_only = both
    regions.make("a", "ref_src", 64 * KiB)
    regions.make("b", "ref_dst", 64 * KiB, remote_write=True)
    regions.make("b", "ref_ro", 64 * KiB)
    regions.make("b", "ref_rd", 64 * KiB, remote_read=True)
    bad: List[Callable[[xferd.Client], Any]] = [
        lambda c: c.write("no_such_region", "b", "ref_dst", KiB, wait=True),
        lambda c: c.write("ref_src", "b", "ref_dst", 128 * KiB, wait=True),
        lambda c: c.write("ref_src", "nobody", "ref_dst", KiB, wait=True),
        lambda c: c.write("ref_src", "b", "ref_dst", 0, wait=True),
        lambda c: c.write("ref_src", "b", "ref_dst", KiB, src_offset=64 * KiB),
        lambda c: c.write_blocks("ref_src", "b", "ref_dst", [0, 8 * KiB], [0, 60 * KiB],
                                 block_length=8 * KiB, wait=True),
        lambda c: c.write("ref_src", "b", "ref_ro", KiB, wait=True),  # refused by the peer
        # A restore's checksums: too few for its slices, and beside verify off.
        lambda c: c.read("b", "ref_rd", "ref_src", 64 * KiB, slice_size=16 * KiB,
                         expected_checksums=[1, 2, 3], wait=True),
        lambda c: c.read("b", "ref_rd", "ref_src", KiB, verify=False, expected_checksums=[1],
                         wait=True),
    ]
    for i, call in enumerate(bad):
        ring_says = refusal(lambda: call(ring))
        assert ring_says == refusal(lambda: call(grpc_only)), i


def test_without_wait_the_handle_follows_by_id(regions: Regions,
                                               both: Tuple[xferd.Client, xferd.Client]) -> None:
    ring, _ = both
    size = 32 * MiB  # larger than lingers: comes back queued
    data = fill_random(regions.make("a", "nw_src", size), seed=3)
    dst = regions.make("b", "nw_dst", size, remote_write=True)
    handle = ring.write("nw_src", "b", "nw_dst", size)
    assert handle.id != 0
    done = handle.wait(WAIT_S)
    assert (done.state, done.bytes_done) == ("done", size)
    assert ring.transfer(handle.id).state == "done"
    np.testing.assert_array_equal(as_array(dst), data)


def test_aio_64_in_flight_on_the_doorbell(cluster: Cluster, regions: Regions) -> None:
    count, block = 64, 16 * KiB
    data = fill_random(regions.make("a", "aio_src", count * block), seed=4)
    dst = regions.make("b", "aio_dst", count * block, remote_write=True)

    async def run() -> Tuple[List[xferd.Transfer], bool]:
        async with xferd.aio.Client(cluster["a"].target) as a:
            async def one(i: int) -> xferd.Transfer:
                handle = await a.write("aio_src", "b", "aio_dst", block, src_offset=i * block,
                                       dst_offset=(count - 1 - i) * block, wait=i % 2 == 0)
                return await handle.wait(WAIT_S)

            done = await asyncio.gather(*(one(i) for i in range(count)))
            return list(done), a.rings_open

    done, used = asyncio.run(run())
    assert used
    assert all((t.state, t.bytes_done) == ("done", block) for t in done)
    assert len({t.id for t in done}) == count
    expect = data.reshape(count, block)[::-1].reshape(-1)
    np.testing.assert_array_equal(as_array(dst), expect)


def test_aio_cancelled_wait_leaves_the_transfer_and_the_rings(cluster: Cluster,
                                                              regions: Regions) -> None:
    """A task cancelled while its write(wait=True) waits on the ring ends
    only its own wait: the transfer carries on to the end, and the client's
    next ring requests get their own completions. TCP only: over verbs a
    paused b does not hold up a one-sided write, so nothing waits."""
    if TRANSPORT != "tcp":
        pytest.skip("over verbs the write goes on while b is paused")
    size = 8 * MiB
    data = fill_random(regions.make("a", "acancel_src", size), seed=5)
    dst = regions.make("b", "acancel_dst", size, remote_write=True)

    async def run() -> Tuple[int, List[xferd.Transfer]]:
        async with xferd.aio.Client(cluster["a"].target) as a:
            await a.write("acancel_src", "b", "acancel_dst", KiB, wait=True)  # rings open
            before = a.ring_requests
            cluster["b"].pause()  # nothing ends while b is stopped
            try:
                waiter = asyncio.ensure_future(
                    a.write("acancel_src", "b", "acancel_dst", size, slice_size=64 * KiB,
                            wait=True))
                await asyncio.sleep(0.3)
                assert a.ring_requests == before + 1 and not waiter.done()
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
            finally:
                cluster["b"].resume()
            after = [await (await a.write("acancel_src", "b", "acancel_dst", 64 * KiB,
                                          src_offset=i * 64 * KiB, dst_offset=i * 64 * KiB,
                                          wait=True)).wait(WAIT_S) for i in range(8)]
            sent = a.ring_requests - before
            # The cancelled write was not cancelled: it ends with every byte.
            # (Waited for here: closing the session would end it.)
            big = [t for t in await a.transfers(include_finished=True)
                   if t.length == size and t.dst_region == "acancel_dst"]
            assert len(big) == 1
            ended = await (await a.handle(big[0].id)).wait(WAIT_S)
            assert (ended.state, ended.bytes_done) == ("done", size)
            return sent, after

    sent, after = asyncio.run(run())
    assert sent == 9  # the cancelled write and the 8 after it, all through the ring
    assert all((t.state, t.bytes_done) == ("done", 64 * KiB) for t in after)
    np.testing.assert_array_equal(as_array(dst), data)


def test_aio_refusal_matches_grpc(cluster: Cluster, regions: Regions) -> None:
    regions.make("a", "aref_src", 4 * KiB)

    async def run(rings: bool) -> Tuple[type, str, str]:
        async with xferd.aio.Client(cluster["a"].target, rings=rings) as a:
            with pytest.raises(xferd.XferdError) as e:
                await a.write("aref_src", "b", "no_such_dst", KiB, wait=True)
            return type(e.value), e.value.code.name, e.value.message

    assert asyncio.run(run(True)) == asyncio.run(run(False))


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
