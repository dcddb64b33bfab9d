"""Bounded listings: ListTransfers, ListRegions and ListPeers come in pages
that fit a stock gRPC client's 4 MiB limit, whatever the daemon holds.
50,000 finished transfers (writes of 64 bytes, every byte checked at the
end) are listed page by page with a plain stub at the default limits, then
by the Python client, which follows the pages itself."""

from __future__ import annotations

import sys
from typing import Dict, Iterator, List

import grpc
import pytest

import pytest_main
import xferd
from daemons import Cluster
from testlib import fill, sha
from xferd.v1 import common_pb2, xferd_pb2, xferd_pb2_grpc

TRANSFERS = 50_000
BATCH = 4096  # the daemon's largest batch
BLOCK = 64
REGIONS = 2_500


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Batches of 4096 normal writes take the whole in-flight limit: no
    # transfers are kept for critical ones.
    with Cluster(("a", "b"), config_extra="[engine]\nhistory = 60000\n"
                 "[priorities]\ncritical_reserve = 0\n") as c:
        c["a"].client().connect_peer(c["b"].address)
        yield c


@pytest.fixture(scope="module")
def stub(cluster: Cluster) -> Iterator[xferd_pb2_grpc.XferdStub]:
    """A stock client: default options, so its receive limit is 4 MiB."""
    with grpc.insecure_channel(cluster["a"].target) as channel:
        yield xferd_pb2_grpc.XferdStub(channel)


@pytest.fixture(scope="module")
def finished(cluster: Cluster) -> List[int]:
    """Ids of TRANSFERS finished writes, each of its own 64-byte block."""
    a, b = cluster["a"].client(), cluster["b"].client()
    src = a.register_region("src", TRANSFERS * BLOCK, backing="shm")
    b.register_region("dst", TRANSFERS * BLOCK, remote_write=True, backing="shm")
    digest = sha(fill(src, 7))
    ids: List[int] = []
    for start in range(0, TRANSFERS, BATCH):
        writes = [xferd_pb2.WriteRequest(src_region="src", peer="b", dst_region="dst",
                                         src_offset=i * BLOCK, dst_offset=i * BLOCK,
                                         length=BLOCK)
                  for i in range(start, min(start + BATCH, TRANSFERS))]
        reply = a.stub.SubmitBatch(xferd_pb2.SubmitBatchRequest(writes=writes, wait=True))
        assert all(t.state == common_pb2.TRANSFER_STATE_DONE for t in reply.transfers)
        ids.extend(t.id for t in reply.transfers)
    assert sha(b.region("dst").buffer) == digest
    return ids


def test_transfers_come_in_pages_a_stock_client_can_read(
        stub: xferd_pb2_grpc.XferdStub, finished: List[int]) -> None:
    seen: List[int] = []
    token, pages = "", 0
    while True:
        page = stub.ListTransfers(xferd_pb2.ListTransfersRequest(
            include_finished=True, page_size=5000, page_token=token))  # capped at 1000
        assert len(page.transfers) <= 1000
        assert page.ByteSize() < 4 << 20
        seen.extend(t.id for t in page.transfers)
        pages += 1
        token = page.next_page_token
        if not token:
            break
    assert seen == sorted(seen, reverse=True), "newest first, across pages"
    assert len(set(seen)) == len(seen), "no transfer twice"
    assert set(finished) <= set(seen)
    assert pages >= TRANSFERS // 1000
    print(f"\n{len(seen)} transfers in {pages} pages")


def test_the_python_client_follows_the_pages(cluster: Cluster, finished: List[int]) -> None:
    a = cluster["a"].client()
    every = a.transfers(include_finished=True)
    assert {t.id for t in every} >= set(finished)
    assert [t.id for t in a.transfers(include_finished=True, limit=1500)] == \
        [t.id for t in every[:1500]]


def test_bad_page_tokens_are_refused(cluster: Cluster, stub: xferd_pb2_grpc.XferdStub) -> None:
    cluster["a"].client().register_region("other", 4096, backing="anonymous")
    regions_token = stub.ListRegions(xferd_pb2.ListRegionsRequest(page_size=1)).next_page_token
    cluster["a"].client().deregister_region("other")
    assert regions_token
    for token in ("garbage", regions_token):  # another list's token too
        with pytest.raises(grpc.RpcError) as refused:
            stub.ListTransfers(xferd_pb2.ListTransfersRequest(page_token=token))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "next_page_token" in refused.value.details()


def test_regions_and_peers_page_by_name(cluster: Cluster,
                                        stub: xferd_pb2_grpc.XferdStub) -> None:
    a = cluster["a"].client()
    names = [f"r{i:05d}" for i in range(REGIONS)]
    for name in names:
        a.register_region(name, 4096, backing="anonymous")
    try:
        token, listed = "", []
        while True:
            page = stub.ListRegions(xferd_pb2.ListRegionsRequest(page_token=token))
            assert len(page.regions) <= 1000
            listed.extend(r.name for r in page.regions)
            token = page.next_page_token
            if not token:
                break
        assert listed == sorted(listed) and set(names) <= set(listed)
        assert {r.name for r in a.regions()} == set(listed)
        one = stub.ListPeers(xferd_pb2.ListPeersRequest(page_size=1))
        assert [p.node_id for p in one.peers] == ["b"] and one.next_page_token == ""
    finally:
        for name in names:
            a.deregister_region(name)


def test_pages_stop_at_a_mebibyte_of_items(cluster: Cluster,
                                           stub: xferd_pb2_grpc.XferdStub) -> None:
    """Regions of long ACLs (about 0.9 MiB of node ids each): a page of all
    six would exceed a stock client's 4 MiB; pages stop at 1 MiB of items
    instead (so one such region a page), and every region is listed once."""
    a = cluster["a"].client()
    acl = [f"node-{i:05d}-" + "n" * 220 for i in range(4000)]
    names = [f"acl{i}" for i in range(6)]
    for name in names:
        a.register_region(name, 4096, backing="anonymous", allowed_peers=acl)
    try:
        token, pages, listed = "", [], []
        while True:
            page = stub.ListRegions(xferd_pb2.ListRegionsRequest(page_token=token))
            assert page.ByteSize() < (1 << 20) + 16384, page.ByteSize()
            pages.append([r.name for r in page.regions])
            listed.extend(r.name for r in page.regions if r.name in names)
            assert all(len(r.allowed_peers) == len(acl) for r in page.regions
                       if r.name in names)
            token = page.next_page_token
            if not token:
                break
        assert listed == names
        assert all(sum(n in names for n in p) <= 1 for p in pages), pages
        assert [r.name for r in a.regions() if r.name in names] == names
    finally:
        for name in names:
            a.deregister_region(name)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
