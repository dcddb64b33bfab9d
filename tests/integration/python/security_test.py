"""Authentication and authorization, end to end (README "Security model").

Daemons a and b run with mTLS from one CA (b also trusts a separate client CA
and lets only the client certificate "ops" use its client API over TCP); d
runs without [tls] (the insecure mode) and c with a certificate from another
CA. Every refusal is checked for its status code and message, and for having
written nothing: b's destination bytes and its received-bytes counter stay
as they were. Certificates are made with openssl at test time (certs.py).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import sys
import tempfile
from concurrent import futures
from typing import Dict, Iterator, Tuple

import grpc
import pytest

import pytest_main
import xferd
from certs import Ca, Cert
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, fill, sha, wait_until
from xferd.v1 import peer_pb2, peer_pb2_grpc, xferd_pb2

SIZE = 256 << 10


class Pki:
    """The CAs and certificates of this module."""

    def __init__(self, directory: str) -> None:
        self.ca = Ca(os.path.join(directory, "ca"), "xferd-ca")
        self.client_ca = Ca(os.path.join(directory, "client-ca"), "client-ca")
        self.rogue_ca = Ca(os.path.join(directory, "rogue"), "rogue-ca")
        self.daemons: Dict[str, Cert] = {n: self.ca.issue(n) for n in ("a", "b")}
        self.rogue_c = self.rogue_ca.issue("c")
        # A certificate of the right CA for a name no daemon has.
        self.mallory = self.ca.issue("mallory")
        self.ops = self.client_ca.issue("ops", dns=["ops"], ips=())
        self.intruder = self.client_ca.issue("intruder", dns=["intruder"], ips=())

    def client_tls(self, cert: Cert, ca: Ca = None) -> xferd.TlsConfig:  # type: ignore
        """Client TLS presenting `cert`, verifying the daemon with the daemon CA."""
        return xferd.TlsConfig(ca=(ca or self.ca).cert, cert=cert.cert, key=cert.key)


@pytest.fixture(scope="module")
def pki() -> Iterator[Pki]:
    directory = tempfile.mkdtemp(prefix="xferd-pki-")
    try:
        yield Pki(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[Cluster]:
    """a, b (mTLS), c (certificate of another CA), d (insecure)."""
    c = Cluster(["a", "b", "c", "d"])
    c["a"].extra_args = pki.daemons["a"].daemon_args(pki.ca)
    c["b"].extra_args = pki.daemons["b"].daemon_args(pki.ca) + [
        "--tls-client-ca", pki.client_ca.cert]
    c["b"].config_extra = '[tls]\nallowed_clients = ["ops"]\n'
    c["c"].extra_args = pki.rogue_c.daemon_args(pki.rogue_ca)
    with c:
        c["a"].client().connect_peer(c["b"].address)
        yield c


@pytest.fixture(scope="module")
def clients(cluster: Cluster) -> Dict[str, xferd.Client]:
    return {name: d.client() for name, d in cluster.daemons.items()}


@pytest.fixture(scope="module")
def target(clients: Dict[str, xferd.Client]) -> Iterator[xferd.Region]:
    """b's destination region, filled with a known pattern; a has a source."""
    dst = clients["b"].register_region("dst", SIZE, backing="shm", remote_write=True)
    fill(dst, seed=7)
    for name in ("a", "c", "d"):
        src = clients[name].register_region("src", SIZE, backing="shm")
        fill(src, seed=1)
    yield dst


class Untouched:
    """Asserts that b's destination and received-bytes counter do not change."""

    def __init__(self, b: xferd.Client, dst: xferd.Region) -> None:
        self.b, self.dst = b, dst
        self.digest = sha(dst.buffer)
        self.received = b.stats().bytes_received

    def check(self) -> None:
        assert sha(self.dst.buffer) == self.digest, "destination bytes changed"
        assert self.b.stats().bytes_received == self.received, "b received bytes"


@pytest.fixture
def untouched(clients: Dict[str, xferd.Client], target: xferd.Region) -> Iterator[Untouched]:
    u = Untouched(clients["b"], target)
    yield u
    u.check()


def rpc_error(call, *args) -> grpc.RpcError:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.RpcError) as info:
        call(*args, timeout=WAIT_S)
    return info.value


# ------------------------------------------------------------------ mTLS --

def test_mtls_daemons_connect_and_transfer(cluster: Cluster, clients: Dict[str, xferd.Client],
                                           target: xferd.Region) -> None:
    a, b = clients["a"], clients["b"]
    assert a.node_info().security.startswith("mtls")
    assert b.node_info().security.startswith("mtls")
    peer = a.connect_peer(cluster["b"].address)
    assert (peer.node_id, peer.state) == ("b", "connected")
    src = a.region("src")
    data = fill(src, seed=99)
    before = b.stats().bytes_received
    assert a.write("src", "b", "dst", SIZE).wait(timeout=WAIT_S).state == "done"
    assert sha(target.buffer) == sha(data)
    assert b.stats().bytes_received == before + SIZE


def test_acl_holds_for_authenticated_peers(clients: Dict[str, xferd.Client],
                                          untouched: Untouched) -> None:
    # With mTLS the node id in a region's ACL is a certificate identity.
    clients["b"].register_region("for_c", SIZE, backing="shm", remote_write=True,
                                 allowed_peers=["c"])
    try:
        with pytest.raises(xferd.PermissionDenied, match="node 'a' is not in the ACL"):
            clients["a"].write("src", "b", "for_c", SIZE).wait(timeout=WAIT_S)
    finally:
        clients["b"].deregister_region("for_c", force=True)


def test_acl_change_takes_the_keys_back(clients: Dict[str, xferd.Client],
                                        target: xferd.Region) -> None:
    # a resolved b's region and wrote it; once b's ACL leaves a out, a's next
    # write is refused and writes nothing (over verbs the keys a holds were
    # memory windows bound to its link, released by the change; the C++
    # verbs_windows_test shows an old key failing on the wire).
    a, b = clients["a"], clients["b"]
    shared = b.register_region("shared", SIZE, backing="shm", remote_write=True,
                               allowed_peers=["a"])
    try:
        data = fill(a.region("src"), seed=51)
        assert a.write("src", "b", "shared", SIZE).wait(timeout=WAIT_S).state == "done"
        assert sha(shared.buffer) == sha(data)
        assert b.set_region_acl("shared", ["c"]).allowed_peers == ("c",)
        assert b.region("shared").allowed_peers == ("c",)
        fill(a.region("src"), seed=52)
        received = b.stats().bytes_received
        with pytest.raises(xferd.PermissionDenied, match="node 'a' is not in the ACL"):
            a.write("src", "b", "shared", SIZE).wait(timeout=WAIT_S)
        assert sha(shared.buffer) == sha(data)
        assert b.stats().bytes_received == received
        # Back in the ACL: a resolves afresh and writes.
        b.set_region_acl("shared", ["c", "a"])
        data = fill(a.region("src"), seed=53)
        assert a.write("src", "b", "shared", SIZE).wait(timeout=WAIT_S).state == "done"
        assert sha(shared.buffer) == sha(data)
        with pytest.raises(xferd.NotFound):
            b.set_region_acl("nowhere", ["a"])
    finally:
        b.deregister_region("shared", force=True)


def test_daemon_without_tls_is_refused_both_ways(cluster: Cluster,
                                                 clients: Dict[str, xferd.Client],
                                                 untouched: Untouched) -> None:
    d = clients["d"]
    assert d.node_info().security.startswith("insecure")
    with pytest.raises(xferd.Unavailable):
        d.connect_peer(cluster["b"].address)
    with pytest.raises(xferd.Unavailable, match="TLS handshake"):
        clients["b"].connect_peer(cluster["d"].address)
    with pytest.raises(xferd.XferdError):
        d.write("src", cluster["b"].address, "dst", SIZE).wait(timeout=WAIT_S)
    assert [p.node_id for p in clients["b"].peers()] == ["a"]


def test_daemon_with_certificate_of_another_ca_is_refused(cluster: Cluster,
                                                          clients: Dict[str, xferd.Client],
                                                          untouched: Untouched) -> None:
    with pytest.raises(xferd.Unavailable, match="TLS handshake"):
        clients["c"].connect_peer(cluster["b"].address)
    with pytest.raises(xferd.Unavailable, match="TLS handshake"):
        clients["b"].connect_peer(cluster["c"].address)
    with pytest.raises(xferd.XferdError):
        clients["c"].write("src", cluster["b"].address, "dst", SIZE).wait(timeout=WAIT_S)
    assert [p.node_id for p in clients["b"].peers()] == ["a"]


def peer_stub(pki: Pki, cert: Cert, address: str) -> Tuple[grpc.Channel, peer_pb2_grpc.PeerServiceStub]:
    creds = pki.client_tls(cert).credentials()
    channel = grpc.secure_channel(address, creds)
    return channel, peer_pb2_grpc.PeerServiceStub(channel)


def test_a_peer_pings_with_its_own_certificate(pki: Pki, cluster: Cluster) -> None:
    """Ping, which a daemon asks after a failure its transport cannot explain,
    answers a peer authenticated as the node it names with the callee's
    incarnation, the same each time while it runs."""
    channel, stub = peer_stub(pki, pki.daemons["a"], cluster["b"].address)
    with channel:
        first = stub.Ping(peer_pb2.PingRequest(node_id="a", incarnation=1), timeout=WAIT_S)
        again = stub.Ping(peer_pb2.PingRequest(node_id="a", incarnation=1), timeout=WAIT_S)
    assert first.incarnation != 0 and again.incarnation == first.incarnation


def test_caller_must_be_the_node_its_certificate_names(pki: Pki, cluster: Cluster,
                                                       clients: Dict[str, xferd.Client],
                                                       untouched: Untouched) -> None:
    # mallory has a certificate of the right CA but claims to be a.
    channel, stub = peer_stub(pki, pki.mallory, cluster["b"].address)
    with channel:
        calls = [
            (stub.Handshake, peer_pb2.HandshakeRequest(
                version=peer_pb2.PROTOCOL_VERSION_1,
                caller=peer_pb2.NodeIdentity(node_id="a", incarnation=1, address="x:1"))),
            (stub.ResolveRegion, peer_pb2.ResolveRegionRequest(node_id="a", region="dst")),
            (stub.InvalidateRegion, peer_pb2.InvalidateRegionRequest(node_id="a", region="dst")),
            (stub.Goodbye, peer_pb2.GoodbyeRequest(node_id="a", reason="bye")),
            (stub.Ping, peer_pb2.PingRequest(node_id="a", incarnation=1)),
        ]
        for method, request in calls:
            e = rpc_error(method, request)
            assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
            assert ("claims node id 'a' but its certificate names [mallory, localhost]"
                    in e.details()), e.details()
    # a's link is intact and still writes.
    assert clients["a"].write("src", "b", "dst", 4096, dst_offset=SIZE - 4096).wait(
        timeout=WAIT_S).state == "done"
    untouched.digest = sha(untouched.dst.buffer)
    untouched.received += 4096


def test_caller_must_advertise_addresses_its_certificate_names(
        pki: Pki, cluster: Cluster, clients: Dict[str, xferd.Client],
        untouched: Untouched) -> None:
    # a's own certificate (SANs a, localhost, 127.0.0.1), but pointing b at
    # hosts that certificate does not name: refused before b links anything.
    channel, stub = peer_stub(pki, pki.daemons["a"], cluster["b"].address)
    with channel:
        cases = [
            ("gRPC address '10.1.2.3:7000'", "add IP:10.1.2.3",
             peer_pb2.NodeIdentity(node_id="a", incarnation=9, address="10.1.2.3:7000"), ""),
            ("gRPC address 'evil.example:7000'", "add DNS:evil.example",
             peer_pb2.NodeIdentity(node_id="a", incarnation=9, address="evil.example:7000"), ""),
            ("TCP data host '10.9.9.9'", "add IP:10.9.9.9",
             peer_pb2.NodeIdentity(node_id="a", incarnation=9, address="127.0.0.1:1"),
             "10.9.9.9"),
        ]
        for what, fix, caller, data_host in cases:
            request = peer_pb2.HandshakeRequest(version=peer_pb2.PROTOCOL_VERSION_1, caller=caller)
            request.endpoints.tcp.host = data_host
            e = rpc_error(stub.Handshake, request)
            assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
            assert (f"the caller advertises {what} but its certificate's subjectAltNames are "
                    "[a, localhost, 127.0.0.1]" in e.details()), e.details()
            assert fix in e.details(), e.details()
    # a's real link (advertising 127.0.0.1, which its certificate names) is intact.
    assert clients["a"].write("src", "b", "dst", 4096, dst_offset=SIZE - 4096).wait(
        timeout=WAIT_S).state == "done"
    untouched.digest = sha(untouched.dst.buffer)
    untouched.received += 4096


def test_daemon_whose_certificate_does_not_name_it_does_not_start(pki: Pki) -> None:
    c = Cluster(["not-mallory"])
    d = c["not-mallory"]
    d.extra_args = pki.mallory.daemon_args(pki.ca)
    try:
        with pytest.raises(AssertionError, match="which tls.cert .* does not name"):
            d.start()
        assert d.proc is not None and d.proc.returncode == 1
    finally:
        shutil.rmtree(c.workdir, ignore_errors=True)


class FakeCallee(peer_pb2_grpc.PeerServiceServicer):
    """A TLS peer service whose certificate names mallory but answers as b."""

    def Handshake(self, request, context):  # type: ignore[no-untyped-def]
        return peer_pb2.HandshakeResponse(
            version=peer_pb2.PROTOCOL_VERSION_1,
            callee=peer_pb2.NodeIdentity(node_id="b", incarnation=5, address="x:1"),
            endpoints=request.endpoints)


def test_callee_must_be_the_node_its_certificate_names(pki: Pki,
                                                       clients: Dict[str, xferd.Client]) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    peer_pb2_grpc.add_PeerServiceServicer_to_server(FakeCallee(), server)
    with open(pki.mallory.key, "rb") as k, open(pki.mallory.cert, "rb") as c, \
            open(pki.ca.cert, "rb") as ca:
        creds = grpc.ssl_server_credentials([(k.read(), c.read())], root_certificates=ca.read(),
                                            require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    try:
        with pytest.raises(xferd.PermissionDenied,
                           match=r"claims node id 'b' but its certificate names \[mallory"):
            clients["a"].connect_peer(f"127.0.0.1:{port}")
        assert clients["a"].peers()[0].address != f"127.0.0.1:{port}"
    finally:
        server.stop(None)


# -------------------------------------------------------------- clients --

def test_client_with_allowed_certificate_over_tcp(pki: Pki, cluster: Cluster) -> None:
    with xferd.Client(cluster["b"].address, tls=pki.client_tls(pki.ops)) as ops:
        assert ops.node_info().node_id == "b"
    # a has no allowed_clients: any certificate its CA verifies will do.
    with xferd.Client(cluster["a"].address, tls=pki.client_tls(pki.mallory)) as m:
        assert m.node_info().node_id == "a"


def test_clients_without_a_valid_certificate_are_refused(pki: Pki, cluster: Cluster,
                                                         untouched: Untouched) -> None:
    address = cluster["b"].address
    no_cert = xferd.TlsConfig(ca=pki.ca.cert)
    rogue = pki.client_tls(pki.rogue_c)
    for label, tls in [("plain", None), ("no certificate", no_cert), ("other CA", rogue)]:
        with xferd.Client(address, tls=tls, rpc_timeout=5) as c:
            with pytest.raises(xferd.Unavailable):
                c.register_region("intruder", SIZE)
    with xferd.Client(address, tls=pki.client_tls(pki.intruder)) as c:
        with pytest.raises(xferd.PermissionDenied, match="not in tls.allowed_clients"):
            c.register_region("intruder", SIZE)
    assert "intruder" not in [r.name for r in xferd.Client(cluster["b"].target).regions()]


def test_client_ca_certificates_never_reach_the_peer_service(pki: Pki, cluster: Cluster,
                                                             untouched: Untouched) -> None:
    channel, stub = peer_stub(pki, pki.ops, cluster["b"].address)
    with channel:
        e = rpc_error(stub.ResolveRegion, peer_pb2.ResolveRegionRequest(node_id="ops",
                                                                         region="dst"))
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
    assert "needs a daemon certificate issued under tls.ca" in e.details()


def test_peer_service_is_refused_on_the_unix_socket(cluster: Cluster,
                                                    untouched: Untouched) -> None:
    for name in ("b", "d"):  # mTLS and insecure alike
        with grpc.insecure_channel(cluster[name].target) as channel:
            stub = peer_pb2_grpc.PeerServiceStub(channel)
            for method, request in [
                    (stub.Handshake, peer_pb2.HandshakeRequest(
                        version=peer_pb2.PROTOCOL_VERSION_1,
                        caller=peer_pb2.NodeIdentity(node_id="a", incarnation=1))),
                    (stub.ResolveRegion, peer_pb2.ResolveRegionRequest(node_id="a",
                                                                       region="dst")),
                    (stub.InvalidateRegion, peer_pb2.InvalidateRegionRequest(node_id="a")),
                    (stub.Goodbye, peer_pb2.GoodbyeRequest(node_id="a")),
                    (stub.Ping, peer_pb2.PingRequest(node_id="a"))]:
                e = rpc_error(method, request)
                assert e.code() == grpc.StatusCode.PERMISSION_DENIED, e
                assert "refused on the unix socket" in e.details()


def test_insecure_mode_is_never_silent(cluster: Cluster, clients: Dict[str, xferd.Client]) -> None:
    info = clients["d"].node_info()
    assert info.security.startswith("insecure: no [tls] configured"), info.security
    with open(cluster["d"].log_path) as log:
        assert "insecure: no [tls] configured" in log.read()


# ----------------------------------------------------------- data plane --

def data_port(daemon) -> int:  # type: ignore[no-untyped-def]
    def probe():  # type: ignore[no-untyped-def]
        with open(daemon.log_path) as log:
            m = re.findall(r"data lanes on [^ ]+:(\d+)", log.read())
        return int(m[-1]) if m else None
    return wait_until("the data port in the log", probe)


def refusals(daemon) -> int:  # type: ignore[no-untyped-def]
    with open(daemon.log_path) as log:
        return log.read().count("refused data connection")


def frame(kind: int, word: int, length: int, blocks: int = 0, seq: int = 0) -> bytes:
    """A data-protocol-2 frame header (daemon/transport/tcp/tcp_frame.h)."""
    return struct.pack("<IBBHIIQQ", 0x32524658, kind, 0, blocks, word, length, 0, seq)


@pytest.mark.skipif(TRANSPORT != "tcp", reason="the TCP transport's data port")
def test_raw_data_connections_are_refused(cluster: Cluster, untouched: Untouched) -> None:
    b = cluster["b"]
    port = data_port(b)
    before = refusals(b)
    attempts = {
        "garbage": os.urandom(48),
        "wrong session token": frame(1, 0, 16) + os.urandom(16),
        "WRITE without HELLO": frame(3, 1, 4096, 1, 1) + struct.pack("<QI", 0, 4096)
        + b"\xff" * 4096,
    }
    for what, payload in attempts.items():
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as s:
            try:
                s.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                assert s.recv(64) == b"", f"{what}: the daemon answered"
            except ConnectionResetError:
                pass  # closed with unread data: refused all the same
    wait_until("the refusals in b's log", lambda: refusals(b) >= before + len(attempts))
    with open(b.log_path) as log:
        text = log.read()
    # With [tls] the data lanes are TLS 1.3 (transport.tcp_encryption's
    # default): plaintext frames never reach the frame parser.
    assert text.count("TLS handshake failed") >= len(attempts)
    assert "first frame is not a HELLO" not in text


# ------------------------------------------------------------ no keys --

def test_client_api_carries_no_keys_or_memory_addresses() -> None:
    """Every message reachable from the client API: no rkey, memory address,
    session token or peer-protocol type (those exist only in peer.proto).
    (Port GIDs in ListDevices are network addresses, as ibv_devinfo shows;
    page tokens of the List calls only say where a listing resumes.)"""
    forbidden = re.compile(r"(^|_)(addr|rkeys?|lkeys?|token|mr_chunk_bytes|notice_ring\w*)"
                           r"($|_)")
    seen, todo = set(), []
    for method in xferd_pb2.DESCRIPTOR.services_by_name["Xferd"].methods:
        todo += [method.input_type, method.output_type]
    while todo:
        message = todo.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        assert message.file.name != "xferd/v1/peer.proto", message.full_name
        for field in message.fields:
            if field.name in ("page_token", "next_page_token"):
                continue
            assert not forbidden.search(field.name), f"{message.full_name}.{field.name}"
            if field.message_type is not None:
                todo.append(field.message_type)
    assert "xferd.v1.Region" in seen and "xferd.v1.NodeInfo" in seen
    # The same names do exist on the peer side, so the pattern would catch them.
    assert forbidden.search("rkeys") and forbidden.search("notice_ring_addr")


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
