"""The asyncio client (xferd.aio) against two real daemons: 100 writes in
flight from one event loop with every byte checked, progress and landed
events from async iterators, typed errors, and cancellation: a cancelled
task cancels its call, never the transfer unless asked."""

from __future__ import annotations

import asyncio
import sys
from typing import List

import pytest

import pytest_main
import xferd
import xferd.aio
from conftest import Regions
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, fill, sha

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

KiB = 1 << 10
MiB = 1 << 20


def test_100_concurrent_writes_from_one_loop(cluster: Cluster, regions: Regions) -> None:
    count, block = 100, 64 * KiB
    data = fill(regions.make("a", "aio_src", count * block), seed=41)
    dst = regions.make("b", "aio_dst", count * block, remote_write=True)

    async def run() -> List[xferd.Transfer]:
        async with xferd.aio.Client(cluster["a"].target) as a, \
                xferd.aio.Client(cluster["b"].target) as b:
            async with b.watch_region("aio_dst") as watch:
                assert watch.subscribed is not None and watch.subscribed.kind == "subscribed"

                async def one(i: int) -> xferd.Transfer:
                    # Block i lands reversed, at block count-1-i; every third
                    # waits in its Write call, the others through their handle.
                    handle = await a.write("aio_src", "b", "aio_dst", block,
                                           src_offset=i * block,
                                           dst_offset=(count - 1 - i) * block, wait=i % 3 == 0)
                    return await handle.wait(WAIT_S)

                done = await asyncio.gather(*(one(i) for i in range(count)))
                landed = [await watch.next_event(WAIT_S) for _ in range(count)]
            assert sorted(e.source_transfer_id for e in landed if e is not None) == \
                sorted(t.id for t in done)
            return list(done)

    done = asyncio.run(run())
    assert len({t.id for t in done}) == count
    assert all((t.state, t.bytes_done, t.transport) == ("done", block, TRANSPORT) for t in done)
    for i in range(count):
        at = (count - 1 - i) * block
        assert dst.buffer[at:at + block] == data[i * block:(i + 1) * block], f"block {i}"


def test_progress_errors_and_the_rest_of_the_surface(cluster: Cluster, regions: Regions) -> None:
    data = fill(regions.make("a", "aio_p_src", 8 * MiB), seed=42)
    dst = regions.make("b", "aio_p_dst", 8 * MiB, remote_write=True)

    async def run() -> None:
        async with xferd.aio.Client(cluster["a"].target) as a:
            assert (await a.node_info()).node_id == "a"
            assert [p.node_id for p in await a.peers()] == ["b"]
            assert "aio_p_src" in [r.name for r in await a.regions()]
            handle = await a.write("aio_p_src", "b", "aio_p_dst", 8 * MiB, slice_size=64 * KiB)
            snapshots = [s async for s in handle]
            assert snapshots[-1].state == "done" and snapshots[-1].bytes_done == 8 * MiB
            assert all(not s.terminal for s in snapshots[:-1])
            assert (await handle.wait()).id == handle.id  # terminal already: no call
            with pytest.raises(xferd.NotFound, match="source region 'nope' is not registered"):
                await a.write("nope", "b", "aio_p_dst", 1)
            with pytest.raises(xferd.NotFound):
                await a.transfer(987654321)
            many = await a.write_blocks("aio_p_src", "b", "aio_p_dst", [0, 4096], [4096, 0],
                                        block_length=4096, wait=True)
            assert (many.last.blocks, many.last.state) == (2, "done")

    asyncio.run(run())
    assert sha(dst.buffer[8192:]) == sha(data[8192:])
    assert dst.buffer[:4096] == data[4096:8192] and dst.buffer[4096:8192] == data[:4096]


def test_cancelled_task_cancels_its_call_not_the_transfer(cluster: Cluster,
                                                          regions: Regions) -> None:
    size = 32 * MiB
    data = fill(regions.make("a", "aio_c_src", size), seed=43)
    dst = regions.make("b", "aio_c_dst", size, remote_write=True)

    async def run() -> None:
        async with xferd.aio.Client(cluster["a"].target) as a:
            await (await a.write("aio_c_src", "b", "aio_c_dst", 4096)).wait(WAIT_S)  # resolve
            cluster["b"].pause()  # nothing ends while b is stopped
            try:
                handle = await a.write("aio_c_src", "b", "aio_c_dst", size, slice_size=4096)
                waiter = asyncio.ensure_future(handle.wait())
                await asyncio.sleep(0.3)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
                with pytest.raises(TimeoutError, match="has not ended after 0.2 s"):
                    await handle.wait(timeout=0.2)
                assert not (await handle.snapshot()).terminal, "cancelling the task ended it"

                asked = await a.write("aio_c_src", "b", "aio_c_dst", size, slice_size=4096)
                waiter = asyncio.ensure_future(asked.wait(cancel=True))
                await asyncio.sleep(0.3)
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
            finally:
                cluster["b"].resume()
            done = await handle.wait(WAIT_S)
            assert (done.state, done.bytes_done) == ("done", size)
            with pytest.raises(xferd.Cancelled) as raised:
                await asked.wait(WAIT_S)
            assert raised.value.transfer is not None

    asyncio.run(run())
    assert sha(dst.buffer) == sha(data)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
