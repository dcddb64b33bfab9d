"""Data integrity across three daemons (a, b, c) on loopback: chains,
concurrent transfers both ways, odd sizes and offsets, batches, file and SHM
regions, landed events, progress, cancel and deadlines. Every byte written is
checked by sha256."""

from __future__ import annotations

import mmap
import os
import sys
import time
from typing import Dict

import grpc
import pytest

import pytest_main
import xferd
from xferd.local_socket import local_socket_for, open_region
from xferd.v1 import xferd_pb2
from conftest import Regions
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, fill, pattern, peer, sha, stress

DAEMONS = ("a", "b", "c")
CONNECT = (("a", "b"), ("b", "c"))

KiB = 1 << 10
MiB = 1 << 20

Clients = Dict[str, xferd.Client]


def resolve(client: xferd.Client, src: str, peer: str, dst: str) -> None:
    """A one-byte write, so `client`'s daemon knows `dst` on `peer`: a first
    write resolves the destination region with the peer over gRPC, which a
    paused peer would not answer."""
    client.write(src, peer, dst, 1).wait(WAIT_S)


def test_transport_is_visible_everywhere(clients: Clients, regions: Regions) -> None:
    for name, client in clients.items():
        assert client.node_info().transport == TRANSPORT, name
        assert client.stats().transport == TRANSPORT, name
    b = peer(clients["a"], "b")
    assert b is not None and (b.transport, b.state, b.outbound) == (TRANSPORT, "connected", True)
    assert b.lanes == 2  # one per poller
    src = regions.make("a", "tv_src", 64 * KiB)
    regions.make("b", "tv_dst", 64 * KiB, remote_write=True)
    assert src.transport == TRANSPORT
    done = clients["a"].write("tv_src", "b", "tv_dst", 64 * KiB).wait(WAIT_S)
    assert done.transport == TRANSPORT
    listed = clients["a"].transfers(include_finished=True, limit=1)
    assert [(t.id, t.transport) for t in listed] == [(done.id, TRANSPORT)]


def test_client_over_tcp_and_peer_named_by_address(cluster: Cluster, clients: Clients,
                                                   regions: Regions) -> None:
    with xferd.Client(cluster["a"].address) as over_tcp:  # "127.0.0.1:port"
        info = over_tcp.node_info()
        assert (info.node_id, info.grpc_address) == ("a", cluster["a"].address)
        assert info.unix_socket == cluster["a"].socket_path
    data = fill(regions.make("a", "addr_src", MiB), seed=13)
    dst = regions.make("b", "addr_dst", MiB, remote_write=True)
    done = clients["a"].write("addr_src", cluster["b"].address, "addr_dst", MiB).wait(WAIT_S)
    assert done.peer == "b"  # reported by node id
    assert sha(dst.buffer) == sha(data)


def test_chain_a_to_b_then_b_to_c(clients: Clients, regions: Regions) -> None:
    size = 64 * MiB
    src = regions.make("a", "chain_src", size)
    mid = regions.make("b", "chain_mid", size, remote_write=True)
    dst = regions.make("c", "chain_dst", size, remote_write=True)
    expected = sha(fill(src, seed=1))

    first = clients["a"].write("chain_src", "b", "chain_mid", size, label="a->b").wait(WAIT_S)
    assert (first.state, first.bytes_done, first.peer, first.label) == ("done", size, "b", "a->b")
    assert sha(mid.buffer) == expected

    second = clients["b"].write("chain_mid", "c", "chain_dst", size).wait(WAIT_S)
    assert (second.state, second.bytes_done, second.peer) == ("done", size, "c")
    assert sha(dst.buffer) == expected


def test_concurrent_transfers_in_both_directions(clients: Clients, regions: Regions) -> None:
    # a was connected to b; b writes back to a over the same (inbound) peer.
    chunk, chunks = 4 * MiB + 123, 4
    size = chunk * chunks
    data = {}
    for side, seed in (("a", 10), ("b", 20)):
        data[side] = fill(regions.make(side, f"bd_src_{side}", size), seed=seed)
    dst = {side: regions.make(side, f"bd_dst_{side}", size, remote_write=True)
           for side in ("a", "b")}

    handles = []
    for i in range(chunks):
        j = chunks - 1 - i  # chunk i lands at position j: offsets are honoured
        for side, other in (("a", "b"), ("b", "a")):
            handles.append((side, other, i, j, clients[side].write(
                f"bd_src_{side}", other, f"bd_dst_{other}", chunk, src_offset=i * chunk,
                dst_offset=j * chunk, slice_size=256 * KiB)))
    for side, other, i, j, handle in handles:
        done = handle.wait(WAIT_S)
        assert done.bytes_done == chunk and done.slices == -(-chunk // (256 * KiB))
        got = dst[other].buffer[j * chunk:(j + 1) * chunk]
        assert sha(got) == sha(data[side][i * chunk:(i + 1) * chunk]), (side, i, j)


@pytest.mark.parametrize("length,src_offset,dst_offset,slice_size", [
    (1, 0, 0, 0),                               # one byte
    (4 * KiB - 1, 1, 2, 4 * KiB),               # under one slice
    (4 * KiB + 1, 4 * KiB - 1, 1, 4 * KiB),     # one slice and one byte
    (3 * 64 * KiB + 17, 12345, 54321, 64 * KiB),
    (5 * MiB + 3, 7, MiB + 1, 0),               # daemon default slice (1 MiB)
    (8 * MiB, 0, 0, 16 * MiB),                  # whole region, largest slice
    (1000, 8 * MiB - 1000, 8 * MiB - 1000, 4 * KiB),  # ends at the last byte
])
def test_odd_sizes_and_offsets(clients: Clients, regions: Regions, length: int,
                               src_offset: int, dst_offset: int, slice_size: int) -> None:
    size = 8 * MiB
    src_data = fill(regions.make("a", "odd_src", size), seed=3)
    dst = regions.make("b", "odd_dst", size, remote_write=True)
    guard = fill(dst, seed=4)

    done = clients["a"].write("odd_src", "b", "odd_dst", length, src_offset=src_offset,
                              dst_offset=dst_offset, slice_size=slice_size).wait(WAIT_S)
    effective_slice = slice_size or MiB
    assert done.slice_size == effective_slice
    assert done.slices == -(-length // effective_slice)
    assert done.bytes_done == length
    end = dst_offset + length
    assert sha(dst.buffer[dst_offset:end]) == sha(src_data[src_offset:src_offset + length])
    # Nothing outside the range was touched.
    assert sha(dst.buffer[:dst_offset]) == sha(guard[:dst_offset])
    assert sha(dst.buffer[end:]) == sha(guard[end:])


@stress
def test_many_two_slice_transfers_all_finish(clients: Clients, regions: Regions) -> None:
    # One bulk slice then the final slice, one transfer at a time: the home
    # poller waits, maybe asleep, for another poller to say the bulk slice is
    # acknowledged. A lost wake-up leaves the transfer RUNNING for good.
    a = clients["a"]
    regions.make("a", "two_src", 8 * KiB)
    regions.make("b", "two_dst", 8 * KiB, remote_write=True)
    for _ in range(2000):
        handle = a.write("two_src", "b", "two_dst", 4 * KiB + 1, slice_size=4 * KiB)
        try:
            handle.wait(5.0)
        except TimeoutError:
            stuck = handle.snapshot()
            handle.cancel()
            pytest.fail(f"transfer stuck: {stuck}")


def test_batch_to_two_peers(clients: Clients, regions: Regions) -> None:
    part = 3 * MiB + 5
    src_data = fill(regions.make("b", "batch_src", 4 * part), seed=5)
    dst = {p: regions.make(p, "batch_dst", 2 * part, remote_write=True) for p in ("a", "c")}
    targets = ("a", "a", "c", "c")
    writes = [
        xferd.WriteSpec("batch_src", target, "batch_dst", part, src_offset=k * part,
                        dst_offset=(k % 2) * part, slice_size=512 * KiB, label=f"w{k}")
        for k, target in enumerate(targets)
    ]
    handles = clients["b"].submit_batch(writes)
    batch_id = handles[0].submitted.batch_id
    assert batch_id != 0
    assert [h.submitted.batch_id for h in handles] == [batch_id] * 4
    assert [h.submitted.label for h in handles] == ["w0", "w1", "w2", "w3"]
    for h in handles:
        assert h.wait(WAIT_S).state == "done"
    listed = clients["b"].transfers(include_finished=True, batch_id=batch_id)
    assert sorted(t.id for t in listed) == sorted(h.id for h in handles)
    for k, target in enumerate(targets):
        at = (k % 2) * part
        assert sha(dst[target].buffer[at:at + part]) == sha(src_data[k * part:(k + 1) * part])


def test_batch_with_one_bad_write_starts_nothing(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    regions.make("a", "bb_src", MiB)
    dst = regions.make("b", "bb_dst", MiB, remote_write=True)
    guard = sha(fill(dst, seed=6))
    before_stats = a.stats()
    before_ids = {t.id for t in a.transfers(include_finished=True)}
    good = {"src_region": "bb_src", "peer": "b", "dst_region": "bb_dst", "length": 4 * KiB}

    with pytest.raises(xferd.OutOfRange) as out_of_range:
        a.submit_batch([good, dict(good, dst_offset=MiB), good])
    assert out_of_range.value.write_index == 1
    assert "write #1: destination range" in out_of_range.value.message

    with pytest.raises(xferd.NotFound) as not_found:
        a.submit_batch([good, good, dict(good, dst_region="bb_nope")])
    assert not_found.value.write_index == 2
    assert "bb_nope" in not_found.value.message

    with pytest.raises(xferd.InvalidArgument) as zero:
        a.submit_batch([dict(good, length=0), good])
    assert zero.value.write_index == 0

    after = a.stats()
    assert after.transfers_submitted == before_stats.transfers_submitted
    assert {t.id for t in a.transfers(include_finished=True)} == before_ids
    assert sha(dst.buffer) == guard


def test_file_to_file(cluster: Cluster, clients: Clients, regions: Regions) -> None:
    size = 16 * MiB + 5
    src_path = os.path.join(cluster.workdir, "f2f_src.bin")
    dst_path = os.path.join(cluster.workdir, "f2f_dst.bin")
    data = pattern(7, size)
    with open(src_path, "wb") as f:
        f.write(data)
    src = regions.make("a", "f2f_src", 0, backing="file", file_path=src_path)
    assert (src.backing, src.size, src.file_path) == ("file", size, src_path)
    dst = regions.make("b", "f2f_dst", size, backing="file", file_path=dst_path, create=True,
                       remote_write=True)
    assert (dst.backing, dst.size) == ("file", size)

    clients["a"].write("f2f_src", "b", "f2f_dst", size, slice_size=MiB).wait(WAIT_S)
    clients["b"].deregister_region("f2f_dst")
    with open(dst_path, "rb") as f:
        on_disk = f.read()
    assert len(on_disk) == size and sha(on_disk) == sha(data)


def test_shm_filled_in_place_and_read_back(clients: Clients, regions: Regions) -> None:
    size = 32 * MiB
    src = regions.make("a", "shm_src", size)
    dst = regions.make("b", "shm_dst", size, remote_write=True)
    assert src.backing == "shm"
    view = src.buffer
    assert (len(view), view.readonly) == (size, False)
    assert src.buffer is view  # one mapping, made once
    expected = sha(fill(src, seed=8))
    clients["a"].write("shm_src", "b", "shm_dst", size).wait(WAIT_S)
    assert sha(dst.buffer) == expected
    # Deregistering unmaps: the old view refuses further use.
    clients["a"].deregister_region("shm_src")
    with pytest.raises(ValueError):
        view[0]


def test_a_deregistered_shm_region_cannot_be_opened(clients: Clients) -> None:
    # The memory belongs to the registration: once deregistered, no client
    # can open it, even though the finished transfer (kept in the daemon's
    # history) still refers to the region; a mapping made before keeps its
    # bytes.
    a = clients["a"]
    src = a.register_region("gone_src", MiB, backing="shm")
    clients["b"].register_region("gone_dst", MiB, backing="shm", remote_write=True)
    local = local_socket_for(a.target)
    assert local is not None
    fd, size, _, _ = open_region(local, "gone_src")
    kept = mmap.mmap(fd, size)
    os.close(fd)
    expected = sha(fill(src, seed=9))
    a.write("gone_src", "b", "gone_dst", MiB).wait(WAIT_S)
    a.deregister_region("gone_src")
    with pytest.raises(xferd.NotFound, match="no region 'gone_src' on this daemon"):
        open_region(local, "gone_src")
    assert sha(kept) == expected
    kept.close()
    clients["b"].deregister_region("gone_dst")


def test_deregistering_a_source_releases_its_memory(clients: Clients) -> None:
    # Finished transfers keep only a snapshot in the history, so the region's
    # memory goes once the last of them lets go (asynchronously, promptly).
    a = clients["a"]
    size = 256 * MiB  # SHM memory is populated at registration: it shows in RSS
    a.register_region("mem_src", size, backing="shm")
    clients["b"].register_region("mem_dst", MiB, backing="shm", remote_write=True)
    a.write("mem_src", "b", "mem_dst", MiB).wait(WAIT_S)
    registered = a.stats().resident_bytes
    a.deregister_region("mem_src")
    clients["b"].deregister_region("mem_dst")
    deadline = time.monotonic() + WAIT_S
    released = 0
    while time.monotonic() < deadline:
        released = registered - a.stats().resident_bytes
        if released >= size * 3 // 4:
            break
        time.sleep(0.05)
    assert released >= size * 3 // 4, f"only {released >> 20} MiB released"


def test_landed_events(clients: Clients, regions: Regions) -> None:
    part, parts = 256 * KiB + 1, 3
    regions.make("a", "ev_src", part * parts)
    regions.make("b", "ev_dst", part * parts, remote_write=True)
    before = clients["b"].stats().landed_events
    with clients["b"].watch_region("ev_dst", timeout=WAIT_S) as watch:
        assert (watch.subscribed.kind, watch.subscribed.region) == ("subscribed", "ev_dst")
        handles = [clients["a"].write("ev_src", "b", "ev_dst", part, src_offset=k * part,
                                      dst_offset=k * part, slice_size=64 * KiB)
                   for k in range(parts)]
        expected = {(k * part, part, h.id) for k, h in enumerate(handles)}
        for h in handles:
            h.wait(WAIT_S)
        events = [watch.next_event(WAIT_S) for _ in range(parts)]
        assert all(e is not None and e.kind == "landed" for e in events), events
        assert [e.sequence for e in events] == [1, 2, 3]
        assert {e.source_node for e in events} == {"a"}
        assert {(e.offset, e.length, e.source_transfer_id) for e in events} == expected
        assert all(e.dropped == 0 and e.region == "ev_dst" for e in events)

        assert clients["b"].region("ev_dst").landed_events == parts
        assert clients["b"].stats().landed_events == before + parts

        clients["b"].deregister_region("ev_dst")
        last = watch.next_event(WAIT_S)
        assert last is not None and last.kind == "deregistered"
        assert watch.next_event(WAIT_S) is None  # the stream ended


def test_two_watchers_and_one_leaves(clients: Clients, regions: Regions) -> None:
    regions.make("a", "w2_src", 64 * KiB)
    regions.make("b", "w2_dst", 64 * KiB, remote_write=True)
    b = clients["b"]
    with b.watch_region("w2_dst", timeout=WAIT_S) as stays:
        leaves = b.watch_region("w2_dst", timeout=WAIT_S)
        first = clients["a"].write("w2_src", "b", "w2_dst", 64 * KiB).wait(WAIT_S)
        for watch in (stays, leaves):
            event = watch.next_event(WAIT_S)
            assert event is not None
            assert (event.kind, event.sequence, event.source_transfer_id) == (
                "landed", 1, first.id)
        leaves.close()
        second = clients["a"].write("w2_src", "b", "w2_dst", 64 * KiB).wait(WAIT_S)
        event = stays.next_event(WAIT_S)
        assert event is not None
        assert (event.kind, event.sequence, event.source_transfer_id) == (
            "landed", 2, second.id)


def test_watch_unknown_region(clients: Clients) -> None:
    with pytest.raises(xferd.NotFound, match="no region named 'nope'"):
        clients["b"].watch_region("nope", timeout=WAIT_S)


def test_progress_snapshots_until_done(cluster: Cluster, clients: Clients,
                                       regions: Regions) -> None:
    size = 64 * MiB
    expected = sha(fill(regions.make("a", "pr_src", size), seed=9))
    dst = regions.make("b", "pr_dst", size, remote_write=True)
    # With b stopped the transfer cannot finish before we watch it.
    resolve(clients["a"], "pr_src", "b", "pr_dst")
    cluster["b"].pause()
    try:
        handle = clients["a"].write("pr_src", "b", "pr_dst", size, slice_size=64 * KiB)
        snapshots = []
        for snapshot in handle.progress(interval=0.01, timeout=WAIT_S):
            if not snapshots:
                cluster["b"].resume()
            snapshots.append(snapshot)
    finally:
        cluster["b"].resume()
    assert len(snapshots) >= 2
    assert not snapshots[0].terminal and snapshots[0].bytes_done < size
    assert all(s.state in ("queued", "running") for s in snapshots[:-1])
    done = [s.bytes_done for s in snapshots]
    assert done == sorted(done)
    assert (snapshots[-1].state, snapshots[-1].bytes_done) == ("done", size)
    assert sha(dst.buffer) == expected


def test_cancel_then_the_link_still_works(cluster: Cluster, clients: Clients,
                                          regions: Regions) -> None:
    a = clients["a"]
    size = 64 * MiB
    expected = sha(fill(regions.make("a", "cx_src", size), seed=11))
    dst = regions.make("b", "cx_dst", size, remote_write=True)
    resolve(a, "cx_src", "b", "cx_dst")
    cancelled_before = a.stats().transfers_cancelled
    cluster["b"].pause()
    try:
        handle = a.write("cx_src", "b", "cx_dst", size, slice_size=64 * KiB)
        assert handle.cancel().state == "cancelled"
        with pytest.raises(xferd.Cancelled) as cancelled:
            handle.wait(WAIT_S)
        assert cancelled.value.transfer is not None
        assert cancelled.value.transfer.state == "cancelled"
        assert "cancelled on request" in cancelled.value.message
        assert a.cancel(handle.id).state == "cancelled"  # unchanged once ended
    finally:
        cluster["b"].resume()
    assert a.stats().transfers_cancelled == cancelled_before + 1
    a.write("cx_src", "b", "cx_dst", size).wait(WAIT_S)
    assert sha(dst.buffer) == expected


def test_transfer_deadline(cluster: Cluster, clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    size = 64 * MiB
    expected = sha(fill(regions.make("a", "dl_src", size), seed=12))
    dst = regions.make("b", "dl_dst", size, remote_write=True)
    resolve(a, "dl_src", "b", "dl_dst")
    cluster["b"].pause()
    try:
        started = time.monotonic()
        handle = a.write("dl_src", "b", "dl_dst", size, slice_size=64 * KiB, timeout=0.3)
        with pytest.raises(xferd.DeadlineExceeded) as expired:
            handle.wait(WAIT_S)
        elapsed = time.monotonic() - started
    finally:
        cluster["b"].resume()
    assert 0.3 <= elapsed < 5.0, elapsed
    assert expired.value.code.name == "DEADLINE_EXCEEDED"
    assert expired.value.transfer is not None
    assert expired.value.transfer.state == "failed"
    assert a.stats().errors.get("DEADLINE_EXCEEDED", 0) >= 1
    a.write("dl_src", "b", "dl_dst", size).wait(WAIT_S)
    assert sha(dst.buffer) == expected


def test_write_with_wait_returns_the_end(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    expected = sha(fill(regions.make("a", "ww_src", MiB), seed=13))
    dst = regions.make("b", "ww_dst", MiB, remote_write=True)
    handle = a.write("ww_src", "b", "ww_dst", MiB, wait=True)
    assert handle.last.state == "done" and handle.last.bytes_done == MiB
    assert handle.wait().state == "done"
    assert sha(dst.buffer) == expected
    with pytest.raises(xferd.OutOfRange):  # refusals still raise from write()
        a.write("ww_src", "b", "ww_dst", MiB, dst_offset=1, wait=True)


def test_linger_replies_with_the_end_or_once_it_runs_out(cluster: Cluster, clients: Clients,
                                                          regions: Regions) -> None:
    """A write without wait lets the daemon hold its reply for the transfer's
    end (Client(linger=...), WriteRequest.linger): one that ends by then comes
    back finished, so wait() needs no call; one that cannot end comes back
    running once the linger ran out, and still ends. A write of more than
    1 MiB never lingers: it comes back at once."""
    a = clients["a"]
    src = fill(regions.make("a", "lg_src", 2 * MiB), seed=14)
    expected = sha(src[:MiB])
    dst = regions.make("b", "lg_dst", 2 * MiB, remote_write=True)
    resolve(a, "lg_src", "b", "lg_dst")
    lingering = xferd.Client(a.target, linger=1.0)
    try:
        handle = lingering.write("lg_src", "b", "lg_dst", MiB)
        assert handle.last.state == "done", handle.last
        assert handle.wait() is handle.last
        assert sha(dst.buffer[:MiB]) == expected
        if TRANSPORT == "tcp":  # over verbs a frozen peer's NIC still completes writes
            cluster["b"].pause()
            try:
                started = time.monotonic()
                handle = lingering.write("lg_src", "b", "lg_dst", MiB)
                elapsed = time.monotonic() - started
                assert not handle.last.terminal, handle.last
                assert 1.0 <= elapsed < 5.0, elapsed
                started = time.monotonic()
                big = lingering.write("lg_src", "b", "lg_dst", MiB + 1)
                elapsed = time.monotonic() - started
                assert not big.last.terminal, big.last
                assert elapsed < 0.5, elapsed
            finally:
                cluster["b"].resume()
            assert handle.wait(WAIT_S).state == "done"
            assert big.wait(WAIT_S).state == "done"
            assert sha(dst.buffer[:MiB + 1]) == sha(src[:MiB + 1])
    finally:
        lingering.close()
    request = xferd_pb2.WriteRequest(peer="b", src_region="lg_src", dst_region="lg_dst",
                                     length=MiB, wait=True)
    request.linger.FromMilliseconds(1)
    with pytest.raises(grpc.RpcError) as both:
        a.stub.Write(request)
    assert both.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "linger is for replies without wait" in both.value.details()
    request.wait = False
    request.linger.FromSeconds(2)
    with pytest.raises(grpc.RpcError) as long:
        a.stub.Write(request)
    assert "longer than 1s: use wait instead" in long.value.details()
    with pytest.raises(ValueError):
        xferd.Client(a.target, linger=-1)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
