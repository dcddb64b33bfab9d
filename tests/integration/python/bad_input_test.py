"""Bad input between two daemons (a -> b): each mistake gets its precise gRPC
status code and a message that says what is wrong, starts no transfer, and
disturbs nothing: after every test a good transfer still lands intact and the
bytes of an unrelated destination region are unchanged."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Callable, Dict, Iterator, Type

import grpc
import pytest

import pytest_main
import xferd
from conftest import Regions
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, fill, sha
from xferd.v1 import common_pb2, peer_pb2, peer_pb2_grpc, xferd_pb2

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

KiB = 1 << 10
MiB = 1 << 20
U64_MAX = 2**64 - 1
SIZE = 4 * MiB  # of the module's source and destination regions

Clients = Dict[str, xferd.Client]


@pytest.fixture(scope="module")
def sentinel(clients: Clients) -> Iterator[Dict[str, str]]:
    """Module-wide regions: a:src (data), b:dst (a guard pattern no test may
    change), b:probe (the target of the after-each good transfer)."""
    a, b = clients["a"], clients["b"]
    src = a.register_region("src", SIZE, backing="shm")
    dst = b.register_region("dst", SIZE, backing="shm", remote_write=True)
    b.register_region("probe", SIZE, backing="shm", remote_write=True)
    digests = {"src": sha(fill(src, seed=1)), "dst": sha(fill(dst, seed=2))}
    yield digests
    for client, name in ((a, "src"), (b, "dst"), (b, "probe")):
        client.deregister_region(name)


@pytest.fixture(autouse=True)
def undisturbed(request: pytest.FixtureRequest, clients: Clients,
                sentinel: Dict[str, str]) -> Iterator[None]:
    """After each test: it started exactly the transfers its `starts` marker
    says (none by default), b:dst is unchanged, and a good write still works."""
    a, b = clients["a"], clients["b"]
    submitted = a.stats().transfers_submitted
    yield
    marker = request.node.get_closest_marker("starts")
    expected = marker.args[0] if marker else 0
    assert a.stats().transfers_submitted - submitted == expected, "transfers started"
    dst = b.region("dst")
    assert sha(dst.buffer) == sentinel["dst"], "b:dst was modified"
    probe = b.region("probe")
    probe.buffer[:] = bytes(SIZE)
    a.write("src", "b", "probe", SIZE).wait(WAIT_S)
    assert sha(probe.buffer) == sentinel["src"], "a good transfer no longer lands intact"


def expect(error: Type[xferd.XferdError], fragment: str, call: Callable[..., object],
           *args: object, **kwargs: object) -> xferd.XferdError:
    """Runs call(*args, **kwargs), which must raise `error` whose message
    contains `fragment`; returns the error."""
    with pytest.raises(error) as raised:
        call(*args, **kwargs)
    assert raised.value.code == error.grpc_code
    assert fragment in raised.value.message, raised.value.message
    return raised.value


# ------------------------------------------------------------- writes --

def test_unknown_source_region(clients: Clients) -> None:
    expect(xferd.NotFound, "source region 'nope' is not registered on this daemon",
           clients["a"].write, "nope", "b", "dst", 1)


def test_unknown_destination_region(clients: Clients) -> None:
    expect(xferd.NotFound, "destination region 'nope' on peer 'b': node 'b' has no region "
           "named 'nope'", clients["a"].write, "src", "b", "nope", 1)


def test_unknown_peer(clients: Clients) -> None:
    expect(xferd.NotFound, "no peer 'zz' (by node id or address): connect it first",
           clients["a"].write, "src", "zz", "dst", 1)


@pytest.mark.parametrize("src_offset,length", [
    (SIZE, 1),             # starts at the end
    (SIZE + 1, 1),         # starts past the end
    (0, SIZE + 1),         # one byte too long
    (SIZE - 10, 11),       # crosses the end
    (U64_MAX, 1),          # offset + length overflows uint64
    (1, U64_MAX),          # length + offset overflows uint64
    (0, U64_MAX),
])
def test_source_range_out_of_bounds(clients: Clients, src_offset: int, length: int) -> None:
    expect(xferd.OutOfRange, f"source range [{src_offset}, {src_offset}+{length}) exceeds "
           f"region 'src' of {SIZE} bytes",
           clients["a"].write, "src", "b", "dst", length, src_offset=src_offset)


@pytest.mark.parametrize("dst_offset,length", [
    (SIZE, 1),
    (SIZE - 10, 11),
    (U64_MAX, 1),
    (U64_MAX - 1, 4),
])
def test_destination_range_out_of_bounds(clients: Clients, dst_offset: int,
                                         length: int) -> None:
    expect(xferd.OutOfRange, f"destination range [{dst_offset}, {dst_offset}+{length}) "
           f"exceeds region 'dst' on peer 'b' of {SIZE} bytes",
           clients["a"].write, "src", "b", "dst", length, dst_offset=dst_offset)


def test_destination_smaller_than_length(clients: Clients, regions: Regions) -> None:
    regions.make("b", "small", 4 * KiB, remote_write=True)
    expect(xferd.OutOfRange, "exceeds region 'small' on peer 'b' of 4096 bytes",
           clients["a"].write, "src", "b", "small", 4 * KiB + 1)


def test_zero_length(clients: Clients) -> None:
    expect(xferd.InvalidArgument, "length is 0: nothing to write",
           clients["a"].write, "src", "b", "dst", 0)


def test_missing_names(clients: Clients) -> None:
    expect(xferd.InvalidArgument, "src_region, peer and dst_region are required",
           clients["a"].write, "src", "", "dst", 1)


@pytest.mark.parametrize("slice_size", [1, 4 * KiB - 1, 16 * MiB + 1, U64_MAX])
def test_slice_size_out_of_range(clients: Clients, slice_size: int) -> None:
    expect(xferd.InvalidArgument, f"slice_size {slice_size} is outside 4KiB..16MiB",
           clients["a"].write, "src", "b", "dst", 1, slice_size=slice_size)


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_timeout_not_positive(clients: Clients, timeout: float) -> None:
    expect(xferd.InvalidArgument, "timeout", clients["a"].write, "src", "b", "dst", 1,
           timeout=timeout)


@pytest.mark.starts(1)
def test_labels_are_bounded(clients: Clients) -> None:
    """A label names its transfer in every listing (1 MiB of it would make one
    page of ListTransfers exceed a stock client's 4 MiB): beyond 256 bytes it
    is refused, saying so, in a write or a batch; 256 bytes are kept whole."""
    a = clients["a"]
    for size in (257, 1 << 20):
        expect(xferd.InvalidArgument, f"label is {size} bytes; at most 256 bytes are kept",
               a.write, "src", "b", "probe", 4096, label="x" * size)
    expect(xferd.InvalidArgument, "write #1: label is 300 bytes; at most 256 bytes are kept",
           a.submit_batch, [xferd.WriteSpec("src", "b", "probe", 4096),
                            xferd.WriteSpec("src", "b", "probe", 4096, label="y" * 300)])
    label = "l" * 256
    done = a.write("src", "b", "probe", 4096, label=label, wait=True).wait(WAIT_S)
    assert done.label == label
    assert a.transfer(done.id).label == label


def test_destination_without_remote_write(clients: Clients, regions: Regions) -> None:
    regions.make("b", "readonly", SIZE)
    expect(xferd.PermissionDenied, "region 'readonly' on peer 'b' does not allow remote writes",
           clients["a"].write, "src", "b", "readonly", 1)


def test_destination_acl_excludes_writer(clients: Clients, regions: Regions) -> None:
    regions.make("b", "for_c_only", SIZE, remote_write=True, allowed_peers=["c"])
    expect(xferd.PermissionDenied, "node 'a' is not in the ACL of region 'for_c_only' on 'b'",
           clients["a"].write, "src", "b", "for_c_only", 1)


# ------------------------------------------------------------ regions --

def test_region_name_clash(clients: Clients, sentinel: Dict[str, str]) -> None:
    expect(xferd.AlreadyExists, "region 'dst' already exists",
           clients["b"].register_region, "dst", 1 * MiB, backing="shm", remote_write=True)
    assert clients["b"].region("dst").size == SIZE  # the existing region is untouched


@pytest.mark.parametrize("name,fragment", [
    ("", "must be 1 to 64 characters long"),
    ("x" * 65, "must be 1 to 64 characters long"),
    ("a/b", "may only contain letters, digits, '.', '_' and '-'"),
    ("sp ace", "may only contain letters"),
    ("caf\u00e9", "may only contain letters"),
    ("..", "may not be '.' or '..'"),
    (".", "may not be '.' or '..'"),
])
def test_invalid_region_names(clients: Clients, name: str, fragment: str) -> None:
    expect(xferd.InvalidArgument, fragment, clients["a"].register_region, name, 4 * KiB)
    assert name not in {r.name for r in clients["a"].regions()}


def test_longest_and_punctuated_names_are_fine(clients: Clients, regions: Regions) -> None:
    for name in ("x" * 64, "a.b_c-D9"):
        assert regions.make("a", name, 4 * KiB, backing="anonymous").name == name


def test_bad_region_sizes_and_options(cluster: Cluster, clients: Clients) -> None:
    a = clients["a"]
    expect(xferd.InvalidArgument, "size must be > 0", a.register_region, "z", 0, backing="shm")
    expect(xferd.InvalidArgument, "must be an absolute path", a.register_region, "f", 4 * KiB,
           backing="file", file_path="relative.bin", create=True)
    expect(xferd.NotFound, "(set create to make it)", a.register_region, "f", 4 * KiB,
           backing="file", file_path=os.path.join(cluster.workdir, "missing.bin"))
    expect(xferd.InvalidArgument, "apply to file-backed regions only", a.register_region, "f",
           4 * KiB, backing="anonymous", file_path="/tmp/x.bin")
    expect(xferd.InvalidArgument, "hugepages apply to anonymous regions only",
           a.register_region, "h", 4 * KiB, backing="shm", hugepages=True)
    expect(xferd.InvalidArgument, "numa_node 999 does not exist: this host has nodes",
           a.register_region, "n", 4 * KiB, numa_node=999)
    expect(xferd.InvalidArgument, "numa_node -1 is negative", a.register_region, "n", 4 * KiB,
           numa_node=-1)
    expect(xferd.InvalidArgument, "numa_node applies to anonymous and shm regions only",
           a.register_region, "n", 4 * KiB, backing="file",
           file_path=os.path.join(cluster.workdir, "n.bin"), create=True, numa_node=0)
    assert {"z", "f", "h", "n"}.isdisjoint(r.name for r in a.regions())
    # Node 0 exists everywhere: bound and said so; unbound regions say -1.
    for backing in ("anonymous", "shm"):
        bound = a.register_region("n", 4 * KiB, backing=backing, numa_node=0)
        assert bound.numa_node == 0
        assert [r.numa_node for r in a.regions() if r.name == "n"] == [0]
        a.deregister_region("n")
    assert a.register_region("n", 4 * KiB).numa_node == -1
    a.deregister_region("n")


def test_a_region_needs_a_backing(clients: Clients) -> None:
    """No default: a RegisterRegion that names no backing is refused, naming
    the three, and nothing is registered (the clients always send one)."""
    a = clients["a"]
    with pytest.raises(grpc.RpcError) as raised:
        a.stub.RegisterRegion(xferd_pb2.RegisterRegionRequest(name="nob", size=4 * KiB),
                              timeout=WAIT_S)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value
    assert raised.value.details() == (
        "region 'nob' has no backing: choose anonymous (daemon memory), shm (memory local "
        "clients map) or file (a mapped file under regions.file_dirs)"), raised.value.details()
    assert "nob" not in {r.name for r in a.regions()}
    with pytest.raises(ValueError, match="backing must be one of"):
        a.register_region("nob", 4 * KiB, backing="")  # type: ignore[arg-type]


def test_file_regions_stay_inside_the_data_directories(cluster: Cluster, clients: Clients) -> None:
    """A file the daemon could write, outside regions.file_dirs (here a file
    standing in for its configuration), a path escaping with '..', and one
    through a symlink: each refused, naming the setting, the file unchanged."""
    a = clients["a"]
    outside = tempfile.mkdtemp(prefix="xferd-outside-")
    try:
        victim = os.path.join(outside, "xferd.toml")
        with open(victim, "wb") as f:
            f.write(b"[tls]\n")
        link = os.path.join(cluster.workdir, "link.bin")
        os.symlink(victim, link)
        for path in (victim, os.path.join(cluster.workdir, "..", os.path.basename(outside),
                                          "xferd.toml"), link):
            for create in (False, True):
                expect(xferd.PermissionDenied, "regions.file_dirs", a.register_region, "f",
                       4 * KiB, backing="file", file_path=path, create=create,
                       remote_write=True)
        with open(victim, "rb") as f:
            assert f.read() == b"[tls]\n"
        assert "f" not in {r.name for r in a.regions()}
    finally:
        shutil.rmtree(outside)
        if os.path.lexists(os.path.join(cluster.workdir, "link.bin")):
            os.unlink(os.path.join(cluster.workdir, "link.bin"))


def test_deregister_unknown_region(clients: Clients) -> None:
    expect(xferd.NotFound, "no region named 'nope'", clients["a"].deregister_region, "nope")


@pytest.mark.starts(2)
def test_deregister_with_transfer_in_flight(cluster: Cluster, clients: Clients,
                                            regions: Regions) -> None:
    a = clients["a"]
    size = 64 * MiB
    regions.make("a", "busy_src", size)
    regions.make("b", "busy_dst", size, remote_write=True)
    a.write("busy_src", "b", "busy_dst", 1).wait(WAIT_S)  # resolve before b stalls
    cluster["b"].pause()  # keeps the next transfer in flight
    try:
        handle = a.write("busy_src", "b", "busy_dst", size, slice_size=64 * KiB)
        expect(xferd.FailedPrecondition, "region 'busy_src' is used by 1 transfer(s) in flight",
               a.deregister_region, "busy_src")
        assert a.transfer(handle.id).state in ("queued", "running")
        assert a.deregister_region("busy_src", force=True) == 1
        error = expect(xferd.Cancelled, "source region 'busy_src' was deregistered",
                       handle.wait, WAIT_S)
        assert error.transfer is not None and error.transfer.state == "cancelled"
    finally:
        cluster["b"].resume()
    assert "busy_src" not in {r.name for r in a.regions()}


@pytest.mark.starts(2)
def test_destination_deregistered_under_a_transfer(cluster: Cluster, clients: Clients,
                                                   regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    size = 64 * MiB
    regions.make("a", "gone_src", size)
    regions.make("b", "gone_dst", size, remote_write=True)
    a.write("gone_src", "b", "gone_dst", 1).wait(WAIT_S)  # resolve before b stalls
    # Stall the transfer with b stopped, then freeze a too: with a frozen, b
    # can wake up and deregister while a still has most of the bytes to send.
    cluster["b"].pause()
    try:
        handle = a.write("gone_src", "b", "gone_dst", size, slice_size=64 * KiB)
        assert handle.snapshot().bytes_done < size // 2
        cluster["a"].pause()
        try:
            cluster["b"].resume()
            b.deregister_region("gone_dst")
        finally:
            cluster["a"].resume()
    finally:
        cluster["b"].resume()
    # TCP's receiver names the unknown region; an RDMA NIC reports a remote
    # access error (and the link is reset; the next write reconnects).
    if TRANSPORT == "tcp":
        error = expect(xferd.NotFound, "peer b refused the write: region id", handle.wait, WAIT_S)
    else:
        error = expect(xferd.Unavailable, "peer b refused the RDMA write", handle.wait, WAIT_S)
    assert error.transfer is not None and error.transfer.state == "failed"
    expect(xferd.NotFound, "node 'b' has no region named 'gone_dst'",
           a.write, "gone_src", "b", "gone_dst", 1)


# ------------------------------------------------- peers and transfers --

def test_unknown_transfer(clients: Clients) -> None:
    a = clients["a"]
    expect(xferd.NotFound, "no transfer with id 987654321", a.transfer, 987654321)
    expect(xferd.NotFound, "no transfer with id 987654321", a.cancel, 987654321)


def test_disconnect_unknown_peer(clients: Clients) -> None:
    expect(xferd.NotFound, "no peer 'zz'", clients["a"].disconnect_peer, "zz")


def test_connect_to_nobody(clients: Clients) -> None:
    expect(xferd.Unavailable, "connecting to peer at 127.0.0.1:1: ",
           clients["a"].connect_peer, "127.0.0.1:1", timeout=5)


def test_connect_to_itself(cluster: Cluster, clients: Clients) -> None:
    expect(xferd.FailedPrecondition, "a daemon cannot connect to itself (node 'a')",
           clients["a"].connect_peer, cluster["a"].address)


def test_handshake_endpoints_the_transport_cannot_take(cluster: Cluster,
                                                      clients: Clients) -> None:
    """A peer whose handshake offers endpoints b's transport cannot take (TCP:
    a session token over 64 bytes; verbs: a QPN beyond 24 bits) is refused
    with INVALID_ARGUMENT saying what, and b links nothing."""
    request = peer_pb2.HandshakeRequest(
        version=peer_pb2.PROTOCOL_VERSION_1,
        caller=peer_pb2.NodeIdentity(node_id="m", incarnation=7, address="127.0.0.1:1"))
    endpoints = request.endpoints
    endpoints.lanes = 1
    if TRANSPORT == "tcp":
        endpoints.transport = common_pb2.TRANSPORT_KIND_TCP
        endpoints.tcp.session_token = b"t" * 65
        what = "malformed TCP endpoint in handshake"
    else:
        endpoints.transport = common_pb2.TRANSPORT_KIND_VERBS
        endpoints.queue_pairs.add(qpn=1 << 24, psn=1, gid=bytes(16), mtu=1024)
        endpoints.notice_ring_slots = 32
        endpoints.max_rd_atomic = endpoints.max_dest_rd_atomic = 1
        what = "malformed queue pair endpoint in handshake"
    with grpc.insecure_channel(cluster["b"].address) as channel:
        with pytest.raises(grpc.RpcError) as raised:
            peer_pb2_grpc.PeerServiceStub(channel).Handshake(request, timeout=WAIT_S)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value
    assert raised.value.details() == what, raised.value.details()
    assert "m" not in {p.node_id for p in clients["b"].peers()}


def test_empty_batch(clients: Clients) -> None:
    expect(xferd.InvalidArgument, "no writes given", clients["a"].submit_batch, [])


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
