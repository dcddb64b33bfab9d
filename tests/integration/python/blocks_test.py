"""Many-block transfers between two daemons (a -> b) through the Python
client: block lists from numpy arrays both ways (write and read), strided
runs, prepared layouts, a 1,000,000-block request through SubmitStream, and
refusals that name the block and move nothing. Every byte of every
destination is checked, those outside the blocks included."""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterator, List

import numpy as np
import pytest

import pytest_main
import xferd
from conftest import Regions
from testlib import WAIT_S, stress

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

KiB = 1 << 10
MiB = 1 << 20
PAGE = 4 * KiB

Clients = Dict[str, xferd.Client]


def view(region: xferd.Region) -> np.ndarray:
    """An SHM region's bytes as a writable uint8 array (no copy)."""
    return np.frombuffer(region.buffer, dtype=np.uint8)


def filled(regions: Regions, daemon: str, name: str, size: int, seed: int,
           **kwargs: Any) -> np.ndarray:
    """Registers an SHM region full of seeded random bytes; returns its view."""
    data = view(regions.make(daemon, name, size, **kwargs))
    data[:] = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    return data


def landed(watch: xferd.RegionWatch) -> xferd.RegionEvent:
    """The next event of `watch`, which must be a landing."""
    event = watch.next_event(WAIT_S)
    assert event is not None and event.kind == "landed", event
    return event


def test_write_blocks_random_permutation_of_pages(clients: Clients, regions: Regions) -> None:
    n = 1024
    src = filled(regions, "a", "perm_src", n * PAGE, seed=1)
    dst = filled(regions, "b", "perm_dst", n * PAGE, seed=2, remote_write=True)
    perm = np.random.default_rng(3).permutation(n)
    with clients["b"].watch_region("perm_dst", timeout=WAIT_S) as watch:
        done = clients["a"].write_blocks("perm_src", "b", "perm_dst", np.arange(n) * PAGE,
                                         perm * PAGE, block_length=PAGE).wait(WAIT_S)
        event = landed(watch)
    assert (done.state, done.direction, done.blocks, done.length, done.bytes_done) == (
        "done", "write", n, n * PAGE, n * PAGE)
    # Page i of the source is page perm[i] of the destination: every byte.
    assert np.array_equal(dst.reshape(n, PAGE)[perm], src.reshape(n, PAGE))
    assert (event.blocks, event.bytes, event.read, event.source_node, event.source_transfer_id,
            event.offset, event.length) == (n, n * PAGE, False, "a", done.id, 0, n * PAGE)


def test_read_blocks_random_permutation_of_pages(clients: Clients, regions: Regions) -> None:
    n = 1024
    remote = filled(regions, "b", "rperm_src", n * PAGE, seed=4, remote_read=True)
    local = filled(regions, "a", "rperm_dst", n * PAGE, seed=5)
    perm = np.random.default_rng(6).permutation(n)
    with clients["a"].watch_region("rperm_dst", timeout=WAIT_S) as watch:
        done = clients["a"].read_blocks("b", "rperm_src", "rperm_dst", perm * PAGE,
                                        np.arange(n, dtype=np.uint32) * PAGE,
                                        block_length=PAGE).wait(WAIT_S)
        event = landed(watch)
    assert (done.state, done.direction, done.blocks, done.length) == ("done", "read", n, n * PAGE)
    assert np.array_equal(local.reshape(n, PAGE), remote.reshape(n, PAGE)[perm])
    assert (event.read, event.source_node, event.source_transfer_id, event.blocks,
            event.bytes) == (True, "b", done.id, n, n * PAGE)


@pytest.mark.parametrize("direction", ["write", "read"])
def test_blocks_of_every_length_leave_the_gaps_alone(clients: Clients, regions: Regions,
                                                     direction: str) -> None:
    # Blocks of 1 byte to 3 pages, packed at the source, scattered with gaps
    # at the destination; the gaps keep their bytes.
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 3 * PAGE, 500)
    src_offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    gaps = rng.integers(1, 100, 500)
    dst_offsets = np.concatenate([[0], np.cumsum(lengths + gaps)[:-1]]) + 13
    size = int(dst_offsets[-1] + lengths[-1] + 13)
    local_is_src = direction == "write"
    src = filled(regions, "a" if local_is_src else "b", "len_src", size, seed=8,
                 remote_read=not local_is_src)
    dst = filled(regions, "b" if local_is_src else "a", "len_dst", size, seed=9,
                 remote_write=local_is_src)
    expected = dst.copy()
    for s, d, length in zip(src_offsets, dst_offsets, lengths):
        expected[d:d + length] = src[s:s + length]
    a = clients["a"]
    if local_is_src:
        handle = a.write_blocks("len_src", "b", "len_dst", src_offsets, dst_offsets, lengths)
    else:  # plain lists: the path without a numpy array
        handle = a.read_blocks("b", "len_src", "len_dst", src_offsets.tolist(),
                               dst_offsets.tolist(), lengths.tolist())
    done = handle.wait(WAIT_S)
    assert (done.blocks, done.length) == (500, int(lengths.sum()))
    assert np.array_equal(dst, expected)


def test_strided_runs_both_ways(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    src = filled(regions, "a", "st_src", 4 * MiB, seed=10)
    dst = filled(regions, "b", "st_dst", 4 * MiB, seed=11, remote_write=True, remote_read=True)
    runs = [
        # Gather 300 blocks of 1000 bytes, one every 3000, into a packed range ...
        xferd.Strided(src_start=5, dst_start=0, block_length=1000, src_stride=3000,
                      dst_stride=1000, count=300),
        # ... then scatter a packed range into every other page.
        xferd.Strided(src_start=MiB, dst_start=2 * MiB, block_length=PAGE, src_stride=PAGE,
                      dst_stride=2 * PAGE, count=200),
    ]
    expected = dst.copy()
    for r in runs:
        for k in range(r.count):
            s, d = r.src_start + k * r.src_stride, r.dst_start + k * r.dst_stride
            expected[d:d + r.block_length] = src[s:s + r.block_length]
    done = a.write_strided("st_src", "b", "st_dst", runs).wait(WAIT_S)
    assert (done.blocks, done.length) == (500, 300 * 1000 + 200 * PAGE)
    assert np.array_equal(dst, expected)

    # Pull the scattered pages back, packed, into a fresh local region.
    back = filled(regions, "a", "st_back", MiB, seed=12)
    before = back.copy()
    run = xferd.Strided(src_start=2 * MiB, dst_start=PAGE, block_length=PAGE,
                        src_stride=2 * PAGE, dst_stride=PAGE, count=200)
    a.read_strided("b", "st_dst", "st_back", run).wait(WAIT_S)
    assert np.array_equal(back[PAGE:201 * PAGE], src[MiB:MiB + 200 * PAGE])
    assert np.array_equal(back[:PAGE], before[:PAGE])
    assert np.array_equal(back[201 * PAGE:], before[201 * PAGE:])


def test_prepared_layouts(clients: Clients, regions: Regions) -> None:
    a, pages = clients["a"], 256
    cache = filled(regions, "a", "kv_a", pages * PAGE, seed=13).reshape(pages, PAGE)
    remote = filled(regions, "b", "kv_b", pages * 2 * PAGE, seed=14, remote_write=True,
                    remote_read=True).reshape(pages, 2 * PAGE)
    local = a.prepare_layout("lay_a", "kv_a", PAGE, count=pages)
    # The peer's pages sit every 8 KiB, at offsets given explicitly.
    remote_pages = a.prepare_layout("lay_b", "kv_b", PAGE, np.arange(pages) * 2 * PAGE, peer="b")
    try:
        assert (local.blocks, local.peer, remote_pages.blocks, remote_pages.peer,
                remote_pages.region) == (
            pages, None, pages, "b", "kv_b")
        assert {"lay_a", "lay_b"} <= {layout.name for layout in a.layouts()}
        rng = np.random.default_rng(15)
        src_pages, dst_pages = rng.permutation(pages)[:100], rng.permutation(pages)[:100]
        untouched = remote.copy()
        done = a.write_indexed(local, "b", remote_pages, src_pages, dst_pages).wait(WAIT_S)
        assert (done.blocks, done.length) == (100, 100 * PAGE)
        untouched[dst_pages, :PAGE] = cache[src_pages]
        assert np.array_equal(remote, untouched)

        # And back by name, into other local pages.
        back = rng.permutation(pages)[:100]
        expected = cache.copy()
        expected[back] = remote[dst_pages, :PAGE]
        a.read_indexed("b", "lay_b", "lay_a", dst_pages, back).wait(WAIT_S)
        assert np.array_equal(cache, expected)

        with pytest.raises(xferd.InvalidArgument) as raised:
            a.write_indexed("lay_a", "b", "lay_b", [0, 256], [1, 2])  # lay_a has pages 0..255
        assert raised.value.message == (
            "block #1: source index 256 is outside layout 'lay_a' of 256 blocks")
    finally:
        a.delete_layout("lay_a")
        a.delete_layout("lay_b")
    assert not {"lay_a", "lay_b"} & {layout.name for layout in a.layouts()}
    with pytest.raises(xferd.NotFound):
        a.write_indexed("lay_a", "b", "lay_b", [0], [0])


def _counting_stream(client: xferd.Client) -> List[int]:
    """Wraps the client's SubmitStream stub; returns the list that receives
    the number of messages of each call."""
    calls: List[int] = []
    original = client.stub.SubmitStream

    def counted(messages: Iterator[Any], **kwargs: Any) -> Any:
        def count() -> Iterator[Any]:
            n = 0
            for message in messages:
                n += 1
                yield message
            calls.append(n)
        return original(count(), **kwargs)

    client.stub.SubmitStream = counted  # type: ignore[method-assign]
    return calls


MILLION = 1_000_000
TINY = 16  # bytes per block: 1,000,000 blocks in a 16 MB region


@stress
def test_million_block_write_through_the_stream(cluster: Any, regions: Regions) -> None:
    a = cluster["a"].client()
    streamed = _counting_stream(a)
    src = filled(regions, "a", "m_src", MILLION * TINY, seed=16)
    dst = filled(regions, "b", "m_dst", MILLION * TINY, seed=17, remote_write=True)
    perm = np.random.default_rng(18).permutation(MILLION)
    done = a.write_blocks("m_src", "b", "m_dst", np.arange(MILLION) * TINY, perm * TINY,
                          block_length=TINY, timeout=120).wait(150)
    assert streamed and streamed[0] >= 16  # 16 MB of offsets in chunks of about 1 MiB
    assert (done.blocks, done.length) == (MILLION, MILLION * TINY)
    assert np.array_equal(dst.reshape(MILLION, TINY)[perm], src.reshape(MILLION, TINY))


def test_block_out_of_range_of_a_million_names_it_and_moves_nothing(
        cluster: Any, regions: Regions) -> None:
    a = cluster["a"].client()
    submitted = a.stats().transfers_submitted
    filled(regions, "a", "oor_src", MILLION * TINY, seed=19)
    dst = filled(regions, "b", "oor_dst", MILLION * TINY, seed=20, remote_write=True)
    before = dst.copy()
    dst_offsets = np.arange(MILLION, dtype=np.uint64) * TINY
    dst_offsets[731512] = MILLION * TINY - TINY // 2  # half past the end
    with pytest.raises(xferd.OutOfRange) as raised:
        a.write_blocks("oor_src", "b", "oor_dst", np.arange(MILLION) * TINY, dst_offsets,
                       block_length=TINY)
    assert raised.value.message.startswith(
        "block #731512: destination range [15999992, 15999992+16) exceeds region 'oor_dst' on "
        "peer 'b' of 16000000 bytes"), raised.value.message
    lengths = np.full(MILLION, TINY)
    lengths[999_999] = 0
    with pytest.raises(xferd.InvalidArgument) as raised:
        a.write_blocks("oor_src", "b", "oor_dst", np.arange(MILLION) * TINY,
                       np.arange(MILLION) * TINY, lengths)
    assert raised.value.message.startswith("block #999999: length is 0"), raised.value.message
    overlapping = np.arange(MILLION, dtype=np.uint64) * TINY
    overlapping[500_000] = overlapping[499_999] + 1
    with pytest.raises(xferd.InvalidArgument) as raised:
        a.write_blocks("oor_src", "b", "oor_dst", np.arange(MILLION) * TINY, overlapping,
                       block_length=TINY)
    assert raised.value.message.startswith("blocks #499999 and #500000: destination ranges ["), (
        raised.value.message)
    assert a.stats().transfers_submitted == submitted
    assert np.array_equal(dst, before)


def test_contiguous_read_is_one_block_in_one_event(clients: Clients, regions: Regions) -> None:
    remote = filled(regions, "b", "cr_src", 5 * MiB, seed=24, remote_read=True)
    local = filled(regions, "a", "cr_dst", 5 * MiB, seed=25)
    before = local.copy()
    with clients["a"].watch_region("cr_dst", timeout=WAIT_S) as watch:
        done = clients["a"].read("b", "cr_src", "cr_dst", 3 * MiB + 5, src_offset=7,
                                 dst_offset=MiB, slice_size=MiB).wait(WAIT_S)
        event = landed(watch)
    assert (done.direction, done.blocks, done.length, done.slices) == ("read", 1, 3 * MiB + 5, 4)
    assert (event.read, event.blocks, event.bytes, event.offset, event.length) == (
        True, 1, 3 * MiB + 5, MiB, 3 * MiB + 5)
    before[MiB:4 * MiB + 5] = remote[7:3 * MiB + 12]
    assert np.array_equal(local, before)


def test_reads_need_remote_read_and_the_acl(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    filled(regions, "b", "nr_src", MiB, seed=21, remote_write=True)  # no remote_read
    filled(regions, "b", "acl_src", MiB, seed=22, remote_read=True, allowed_peers=["c"])
    local = filled(regions, "a", "nr_dst", MiB, seed=23)
    before = local.copy()
    for src in ("nr_src", "acl_src"):
        # Refused at submission or failed once the peer refuses: either way
        # PERMISSION_DENIED naming the region, and nothing read.
        with pytest.raises(xferd.PermissionDenied, match=src):
            a.read("b", src, "nr_dst", MiB).wait(WAIT_S)
        with pytest.raises(xferd.PermissionDenied, match=src):
            a.read_blocks("b", src, "nr_dst", [0, PAGE], [PAGE, 0],
                          block_length=PAGE).wait(WAIT_S)
        with pytest.raises(xferd.PermissionDenied, match=src):
            a.read_strided("b", src, "nr_dst",
                           xferd.Strided(0, 0, PAGE, PAGE, PAGE, 4)).wait(WAIT_S)
    assert np.array_equal(local, before)


def test_a_watcher_that_asks_gets_a_writes_ranges(clients: Clients, regions: Regions) -> None:
    n = 1024
    src = filled(regions, "a", "rg_src", n * PAGE, seed=40)
    dst = filled(regions, "b", "rg_dst", n * PAGE, seed=41, remote_write=True, landed_ranges=True)
    assert clients["b"].region("rg_dst").landed_ranges
    # Pairs of neighbouring pages, shuffled: ranges of two pages or more.
    pairs = np.random.default_rng(42).permutation(n // 2)
    perm = np.stack([2 * pairs, 2 * pairs + 1], axis=1).ravel()
    with clients["b"].watch_region("rg_dst", timeout=WAIT_S, ranges=True) as asking, \
            clients["b"].watch_region("rg_dst", timeout=WAIT_S) as plain:
        done = clients["a"].write_blocks("rg_src", "b", "rg_dst", np.arange(n) * PAGE,
                                         perm * PAGE, block_length=PAGE).wait(WAIT_S)
        event, other = landed(asking), landed(plain)
    assert done.state == "done"
    assert np.array_equal(dst.reshape(n, PAGE)[perm], src.reshape(n, PAGE))
    assert event.ranges is not None and not event.ranges_missing
    offsets, lengths = event.ranges
    # Shuffled, the blocks still cover the whole region: one range.
    assert offsets.dtype == np.uint64 and offsets.tolist() == [0]
    assert lengths.tolist() == [n * PAGE]
    assert (event.blocks, event.bytes, event.source_transfer_id) == (n, n * PAGE, done.id)
    # A watcher that did not ask gets the same event without them.
    assert (other.ranges, other.ranges_missing, other.sequence) == (None, False, event.sequence)


def test_ranges_merge_by_destination_whatever_the_order(clients: Clients,
                                                        regions: Regions) -> None:
    """16,384 pages in random order over 64 MiB are one range [0, 64 MiB),
    not 16,382 (merging only what is adjacent in request order); pages with
    holes between them give a range per run, by offset."""
    n = 16384
    src = filled(regions, "a", "rgm_src", n * PAGE, seed=49)
    dst = filled(regions, "b", "rgm_dst", n * PAGE, seed=50, remote_write=True,
                 landed_ranges=True)
    perm = np.random.default_rng(51).permutation(n)
    holes = np.random.default_rng(52).permutation(np.arange(0, n, 2))[:1000]  # even pages
    with clients["b"].watch_region("rgm_dst", timeout=WAIT_S, ranges=True) as watch:
        whole = clients["a"].write_blocks("rgm_src", "b", "rgm_dst", np.arange(n) * PAGE,
                                          perm * PAGE, block_length=PAGE).wait(WAIT_S)
        first = landed(watch)
        sparse = clients["a"].write_blocks("rgm_src", "b", "rgm_dst",
                                           np.arange(len(holes)) * PAGE, holes * PAGE,
                                           block_length=PAGE).wait(WAIT_S)
        second = landed(watch)
    assert (whole.state, sparse.state) == ("done", "done")
    # The sparse write's pages over the whole one's.
    expected = src.reshape(n, PAGE)[np.argsort(perm)]
    expected[holes] = src.reshape(n, PAGE)[:len(holes)]
    assert np.array_equal(dst.reshape(n, PAGE), expected)
    offsets, lengths = first.ranges
    assert (offsets.tolist(), lengths.tolist()) == ([0], [n * PAGE])
    offsets, lengths = second.ranges
    assert offsets.tolist() == sorted(int(h) * PAGE for h in holes)
    assert lengths.tolist() == [PAGE] * len(holes)


def test_ranges_of_many_blocks_come_in_chunks(clients: Clients, regions: Regions) -> None:
    # 200,000 blocks of 16 bytes, 32 apart: 200,000 ranges, four chunks.
    n, length = 200_000, 16
    src = filled(regions, "a", "rgc_src", n * length, seed=43)
    dst = filled(regions, "b", "rgc_dst", 2 * n * length, seed=44, remote_write=True,
                 landed_ranges=True)
    dst_offsets = np.random.default_rng(45).permutation(n).astype(np.uint64) * 2 * length
    with clients["b"].watch_region("rgc_dst", timeout=WAIT_S, ranges=True) as watch:
        done = clients["a"].write_blocks("rgc_src", "b", "rgc_dst", np.arange(n) * length,
                                         dst_offsets, block_length=length).wait(WAIT_S)
        event = landed(watch)
    assert done.state == "done"
    placed = dst.reshape(n, 2 * length)[(dst_offsets // (2 * length)).astype(np.int64), :length]
    assert np.array_equal(placed, src.reshape(n, length))
    offsets, lengths = event.ranges
    assert np.array_equal(offsets, np.sort(dst_offsets))  # by offset, none side by side
    assert np.array_equal(lengths, np.full(n, length, dtype=np.uint64))


def test_a_read_reports_its_own_ranges(clients: Clients, regions: Regions) -> None:
    n = 256
    remote = filled(regions, "b", "rgr_src", n * PAGE, seed=46, remote_read=True)
    local = filled(regions, "a", "rgr_dst", 2 * n * PAGE, seed=47, landed_ranges=True)
    dst_offsets = np.random.default_rng(48).permutation(n) * 2 * PAGE
    with clients["a"].watch_region("rgr_dst", timeout=WAIT_S, ranges=True) as watch:
        done = clients["a"].read_blocks("b", "rgr_src", "rgr_dst", np.arange(n) * PAGE,
                                        dst_offsets, block_length=PAGE).wait(WAIT_S)
        event = landed(watch)
    assert done.state == "done" and event.read
    assert np.array_equal(local.reshape(2 * n, PAGE)[dst_offsets // PAGE], remote.reshape(n, PAGE))
    offsets, lengths = event.ranges
    assert np.array_equal(offsets, np.sort(dst_offsets).astype(np.uint64))
    assert np.array_equal(lengths, np.full(n, PAGE, dtype=np.uint64))


def test_ranges_only_for_a_region_that_keeps_them(clients: Clients, regions: Regions) -> None:
    regions.make("b", "rg_plain", MiB, remote_write=True)
    with pytest.raises(xferd.FailedPrecondition, match="register it with landed_ranges"):
        clients["b"].watch_region("rg_plain", timeout=WAIT_S, ranges=True)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
