"""Unit tests of the xferd client against an in-process fake Xferd service:
error mapping, conversions, transfer handles, region watches and SHM maps.
No daemon is involved (tests/integration/python drives real ones)."""

from __future__ import annotations

import concurrent.futures
import os
import re
import socket
import sys
import tempfile
import threading
import unittest
from typing import Any, Callable, Dict, Iterator, List

import grpc
import numpy as np

import xferd
from xferd.shm import Mappings, ShmMapping
from xferd.v1 import common_pb2, local_pb2, xferd_pb2, xferd_pb2_grpc

_TCP = common_pb2.TRANSPORT_KIND_TCP


def _transfer(state: int, bytes_done: int = 0, code: int = 0, message: str = "",
              transfer_id: int = 7) -> xferd_pb2.Transfer:
    t = xferd_pb2.Transfer(id=transfer_id, state=state, length=100, bytes_done=bytes_done,
                           transport=_TCP, peer="b", src_region="s", dst_region="d")
    if code:
        t.error.code, t.error.message = code, message
    return t


class FakeXferd(xferd_pb2_grpc.XferdServicer):
    """Answers from per-test scripts: handlers[method](request, context)."""

    def __init__(self) -> None:
        self.handlers: Dict[str, Callable[[Any, grpc.ServicerContext], Any]] = {}
        self.requests: List[Any] = []

    def _handle(self, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        self.requests.append(request)
        handler = self.handlers.get(method)
        if handler is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} not scripted")
        return handler(request, context)


# Every scripted RPC goes through FakeXferd._handle under its own name.
for _method in ("RegisterRegion", "DeregisterRegion", "Write", "Read", "SubmitStream",
                "SubmitBatch", "GetNodeInfo", "GetStats", "ListPeers", "WatchTransfer", "WaitTransfer",
                "WatchRegion", "PrepareLayout", "DeleteLayout", "ListLayouts"):
    setattr(FakeXferd, _method,
            lambda self, request, context, _name=_method: self._handle(_name, request, context))


class FakeServerTest(unittest.TestCase):
    """Each test scripts the fake service, then calls it through a Client
    over a unix socket."""

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="xfc", dir="/tmp")
        self.fake = FakeXferd()
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=8))
        xferd_pb2_grpc.add_XferdServicer_to_server(self.fake, self.server)
        path = os.path.join(self.tmp, "s.sock")
        self.server.add_insecure_port("unix:" + path)
        self.server.start()
        self.client = xferd.Client("unix:" + path, rpc_timeout=10)

    def tearDown(self) -> None:
        self.client.close()
        self.server.stop(grace=None)
        for name in os.listdir(self.tmp):
            os.unlink(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)


class ClientTest(FakeServerTest):
    """Errors, conversions, handles, watches and SHM maps."""

    def test_errors_carry_code_message_and_class(self) -> None:
        cases = {
            grpc.StatusCode.NOT_FOUND: xferd.NotFound,
            grpc.StatusCode.OUT_OF_RANGE: xferd.OutOfRange,
            grpc.StatusCode.ALREADY_EXISTS: xferd.AlreadyExists,
            grpc.StatusCode.PERMISSION_DENIED: xferd.PermissionDenied,
            grpc.StatusCode.FAILED_PRECONDITION: xferd.FailedPrecondition,
            grpc.StatusCode.RESOURCE_EXHAUSTED: xferd.ResourceExhausted,
        }
        for code, cls in cases.items():
            self.fake.handlers["Write"] = lambda r, c, k=code: c.abort(k, "why: " + k.name)
            with self.assertRaises(cls) as raised:
                self.client.write("s", "b", "d", 1)
            self.assertEqual(raised.exception.code, code)
            self.assertEqual(raised.exception.message, "why: " + code.name)
            self.assertIsInstance(raised.exception, xferd.XferdError)
            self.assertIsNone(raised.exception.write_index)

    def test_batch_error_names_the_write(self) -> None:
        self.fake.handlers["SubmitBatch"] = lambda r, c: c.abort(
            grpc.StatusCode.INVALID_ARGUMENT, "write #3: length is 0: nothing to write")
        with self.assertRaises(xferd.InvalidArgument) as raised:
            self.client.submit_batch([xferd.WriteSpec("s", "b", "d", 1)] * 4)
        self.assertEqual(raised.exception.write_index, 3)

    def test_write_request_fields_and_batch_specs(self) -> None:
        self.fake.handlers["Write"] = lambda r, c: _transfer(common_pb2.TRANSFER_STATE_QUEUED)
        self.fake.handlers["SubmitBatch"] = lambda r, c: xferd_pb2.SubmitBatchResponse(
            batch_id=4, transfers=[_transfer(common_pb2.TRANSFER_STATE_QUEUED, transfer_id=i)
                                   for i in (1, 2)])
        handle = self.client.write("s", "b", "d", 10, src_offset=1, dst_offset=2,
                                   slice_size=4096, timeout=1.5, label="x")
        sent = self.fake.requests[-1]
        self.assertEqual((sent.src_offset, sent.dst_offset, sent.slice_size, sent.label),
                         (1, 2, 4096, "x"))
        self.assertEqual((sent.timeout.seconds, sent.timeout.nanos), (1, 500000000))
        self.assertEqual((handle.id, handle.submitted.state, handle.submitted.transport),
                         (7, "queued", "tcp"))
        handles = self.client.submit_batch(
            [xferd.WriteSpec("s", "b", "d", 1), {"src_region": "s", "peer": "b",
                                                 "dst_region": "d", "length": 2}])
        self.assertEqual([h.id for h in handles], [1, 2])
        self.assertEqual([w.length for w in self.fake.requests[-1].writes], [1, 2])
        self.assertFalse(self.fake.requests[-1].writes[0].HasField("timeout"))

    def test_wait_returns_done_and_raises_typed_failures(self) -> None:
        self.fake.handlers["Write"] = lambda r, c: _transfer(common_pb2.TRANSFER_STATE_QUEUED)
        outcome: List[xferd_pb2.Transfer] = []
        # One unary call, no stream: the cost of write(..., wait=True).
        self.fake.handlers["WaitTransfer"] = lambda r, c: outcome[0]

        outcome[:] = [_transfer(common_pb2.TRANSFER_STATE_DONE, 100)]
        done = self.client.write("s", "b", "d", 100).wait(10)
        self.assertEqual((done.state, done.bytes_done, done.terminal), ("done", 100, True))
        self.assertEqual(self.fake.requests[-1], xferd_pb2.WaitTransferRequest(id=7))

        for state, code, cls in ((common_pb2.TRANSFER_STATE_FAILED, 14, xferd.Unavailable),
                                 (common_pb2.TRANSFER_STATE_FAILED, 4, xferd.DeadlineExceeded),
                                 (common_pb2.TRANSFER_STATE_CANCELLED, 1, xferd.Cancelled)):
            outcome[:] = [_transfer(state, 10, code, "peer went away")]
            handle = self.client.write("s", "b", "d", 100)
            with self.assertRaises(cls) as raised:
                handle.wait(10)
            self.assertEqual(raised.exception.message, "peer went away")
            self.assertIsNotNone(raised.exception.transfer)
            self.assertEqual(raised.exception.transfer.bytes_done, 10)

    def test_write_with_wait_is_one_call_without_deadline(self) -> None:
        seen: List[Any] = []

        def write(request: Any, context: grpc.ServicerContext) -> Any:
            seen.append(context.time_remaining())
            return _transfer(common_pb2.TRANSFER_STATE_FAILED, 10, 4, "too slow")

        self.fake.handlers["Write"] = write
        handle = self.client.write("s", "b", "d", 100, wait=True)
        self.assertTrue(self.fake.requests[-1].wait)
        # No deadline reaches the server as "centuries left".
        self.assertGreater(seen[-1], 1e9, "a waiting write must not expire before its transfer")
        with self.assertRaises(xferd.DeadlineExceeded):  # at once: no WatchTransfer
            handle.wait()
        self.client.write("s", "b", "d", 100, wait=True, timeout=2.0)
        self.assertGreater(seen[-1], 2.0)  # its deadline plus the usual allowance
        self.client.write("s", "b", "d", 100)
        self.assertFalse(self.fake.requests[-1].wait)
        self.assertLess(seen[-1], self.client.rpc_timeout + 1)

    def test_progress_yields_until_terminal_and_wait_times_out(self) -> None:
        self.fake.handlers["Write"] = lambda r, c: _transfer(common_pb2.TRANSFER_STATE_QUEUED)
        snapshots = [_transfer(common_pb2.TRANSFER_STATE_RUNNING, n) for n in (0, 40, 80)]
        self.fake.handlers["WatchTransfer"] = lambda r, c: iter(
            snapshots + [_transfer(common_pb2.TRANSFER_STATE_DONE, 100)])
        seen = [(s.state, s.bytes_done) for s in self.client.write("s", "b", "d", 100)]
        self.assertEqual(seen, [("running", 0), ("running", 40), ("running", 80),
                                ("done", 100)])

        release = threading.Event()

        def never_ends(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            yield _transfer(common_pb2.TRANSFER_STATE_RUNNING, 1)
            release.wait(10)

        def never_returns(request: Any, context: grpc.ServicerContext) -> Any:
            release.wait(10)
            return _transfer(common_pb2.TRANSFER_STATE_DONE, 100)

        self.fake.handlers["WatchTransfer"] = never_ends
        self.fake.handlers["WaitTransfer"] = never_returns
        try:
            with self.assertRaisesRegex(TimeoutError, "transfer 7 has not ended after 0.3 s"):
                self.client.write("s", "b", "d", 100).wait(timeout=0.3)
            with self.assertRaises(TimeoutError):
                for _ in self.client.write("s", "b", "d", 100).progress(timeout=0.3):
                    pass
        finally:
            release.set()

    def test_watch_region_returns_once_subscribed(self) -> None:
        release = threading.Event()

        def events(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            yield xferd_pb2.RegionEvent(kind=xferd_pb2.RegionEvent.KIND_SUBSCRIBED,
                                        region=request.name)
            release.wait(10)
            yield xferd_pb2.RegionEvent(kind=xferd_pb2.RegionEvent.KIND_LANDED,
                                        region=request.name, offset=5, length=6,
                                        source_node="a", source_transfer_id=9, sequence=1)
            yield xferd_pb2.RegionEvent(kind=xferd_pb2.RegionEvent.KIND_DEREGISTERED,
                                        region=request.name)

        self.fake.handlers["WatchRegion"] = events
        with self.client.watch_region("r", timeout=10) as watch:
            self.assertEqual((watch.subscribed.kind, watch.subscribed.region),
                             ("subscribed", "r"))
            with self.assertRaises(TimeoutError):
                watch.next_event(timeout=0.1)
            release.set()
            landed = watch.next_event(timeout=10)
            assert landed is not None
            self.assertEqual((landed.kind, landed.offset, landed.length, landed.source_node,
                              landed.source_transfer_id, landed.sequence),
                             ("landed", 5, 6, "a", 9, 1))
            self.assertEqual([e.kind for e in watch], ["deregistered"])
            self.assertIsNone(watch.next_event(timeout=10))

    def test_watch_region_errors(self) -> None:
        self.fake.handlers["WatchRegion"] = lambda r, c: c.abort(
            grpc.StatusCode.NOT_FOUND, "no region named 'r'")
        with self.assertRaises(xferd.NotFound):
            self.client.watch_region("r", timeout=10)
        self.fake.handlers["WatchRegion"] = lambda r, c: iter(
            [xferd_pb2.RegionEvent(kind=xferd_pb2.RegionEvent.KIND_LANDED)])
        with self.assertRaises(xferd.Internal):
            self.client.watch_region("r", timeout=10)

    def test_conversions(self) -> None:
        info = xferd_pb2.NodeInfo(node_id="n", transport=common_pb2.TRANSPORT_KIND_VERBS,
                                  device="rxe0:1", pollers=2)
        self.fake.handlers["GetNodeInfo"] = lambda r, c: info
        node = self.client.node_info()
        self.assertEqual((node.node_id, node.transport, node.device, node.started_at),
                         ("n", "verbs", "rxe0:1", None))
        stats = xferd_pb2.Stats(transport=_TCP, transfers_failed=2)
        stats.errors["UNAVAILABLE"] = 2
        stats.uptime.seconds = 3
        self.fake.handlers["GetStats"] = lambda r, c: stats
        s = self.client.stats()
        self.assertEqual((s.transport, s.transfers_failed, dict(s.errors), s.uptime.seconds),
                         ("tcp", 2, {"UNAVAILABLE": 2}, 3))
        broken = xferd_pb2.Peer(node_id="b", transport=_TCP, state=xferd_pb2.Peer.STATE_BROKEN)
        broken.last_error.code, broken.last_error.message = 14, "reset"
        self.fake.handlers["ListPeers"] = lambda r, c: xferd_pb2.ListPeersResponse(
            peers=[broken])
        (peer,) = self.client.peers()
        self.assertEqual((peer.state, peer.transport), ("broken", "tcp"))
        self.assertEqual(peer.last_error, xferd.Status(grpc.StatusCode.UNAVAILABLE, "reset"))

    def test_unix_targets_stay_plain_under_tls(self) -> None:
        """A TlsConfig leaves a unix socket plain: the call reaches the
        plaintext fake (TLS could not even start: the CA file is missing)."""
        self.fake.handlers["GetNodeInfo"] = lambda r, c: xferd_pb2.NodeInfo(node_id="plain")
        with xferd.Client(self.client.target, rpc_timeout=10,
                          tls=xferd.TlsConfig(ca="/nonexistent")) as client:
            self.assertEqual(client.node_info().node_id, "plain")

    def test_register_region_validates_backing(self) -> None:
        with self.assertRaises(ValueError):
            self.client.register_region("r", 10, backing="hugetlbfs")

    def _serve_region(self, memfd: int, size: int, node_id: str = "",
                      pid: int = 0) -> threading.Thread:
        """A fake local socket beside the fake's unix socket that answers one
        open_region with `memfd`, as the daemon does."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(os.path.join(self.tmp, "s.sock.local"))
        listener.listen(1)

        def serve() -> None:
            with listener, listener.accept()[0] as conn:
                request = local_pb2.LocalRequest.FromString(conn.recv(1 << 16))
                reply = local_pb2.LocalReply()
                reply.region.region = request.open_region.region
                reply.region.size = size
                reply.region.node_id = node_id
                reply.region.pid = pid
                socket.send_fds(conn, [reply.SerializeToString()], [memfd])

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        return thread

    def test_shm_region_buffer_is_mapped_lazily_and_closed_on_deregister(self) -> None:
        memfd = os.memfd_create("client-test")
        os.ftruncate(memfd, 8192)
        self.fake.handlers["RegisterRegion"] = lambda r, c: xferd_pb2.Region(
            name=r.name, size=r.size, backing=r.backing, transport=_TCP)
        self.fake.handlers["DeregisterRegion"] = lambda r, c: xferd_pb2.DeregisterRegionResponse()
        region = self.client.register_region("r", 8192, backing="shm")
        assert region._mapping is not None
        self.assertFalse(region._mapping.mapped)
        server = self._serve_region(memfd, 8192)
        region.buffer[100:105] = b"hello"
        server.join(10)
        self.assertEqual(os.pread(memfd, 5, 100), b"hello")
        os.close(memfd)
        self.client.deregister_region("r")
        with self.assertRaises(ValueError):
            region.buffer
        anonymous = xferd.Region.from_proto(xferd_pb2.Region(name="x", size=1))
        with self.assertRaises(ValueError):
            anonymous.buffer

    def test_shm_region_over_tcp_maps_only_the_same_daemons_memory(self) -> None:
        """Over TCP the mapping goes through the local socket NodeInfo names,
        if it is on this host and answers as the same daemon."""
        shm = xferd_pb2.Region(name="r", size=4096, backing=common_pb2.REGION_BACKING_SHM)
        local = os.path.join(self.tmp, "s.sock.local")
        info = xferd_pb2.NodeInfo(node_id="b", pid=7, local_socket=local)
        far = Mappings("127.0.0.1:1", None, lambda: xferd_pb2.NodeInfo(node_id="b")).open(shm)
        assert far is not None
        with self.assertRaisesRegex(ValueError, "only a client on the daemon's host"):
            far.view()
        memfd = os.memfd_create("client-test")
        os.ftruncate(memfd, 4096)
        server = self._serve_region(memfd, 4096, node_id="b", pid=8)  # another daemon b
        other = Mappings("127.0.0.1:1", None, lambda: info).open(shm)
        assert other is not None
        with self.assertRaisesRegex(xferd.FailedPrecondition, "belongs to daemon 'b' .pid 8."):
            other.view()
        server.join(10)
        os.unlink(local)
        server = self._serve_region(memfd, 4096, node_id="b", pid=7)
        same = Mappings("127.0.0.1:1", None, lambda: info).open(shm)
        assert same is not None
        same.view()[0:2] = b"ok"
        server.join(10)
        self.assertEqual(os.pread(memfd, 2, 0), b"ok")
        same.close()
        os.close(memfd)

    def test_shm_mapping_close_tolerates_derived_views(self) -> None:
        memfd = os.memfd_create("client-test2")
        os.ftruncate(memfd, 4096)
        mapping = ShmMapping("r", 4096, lambda: (os.dup(memfd), 4096))
        view = mapping.view()
        os.close(memfd)
        derived = view[10:20]
        mapping.close()
        derived[0] = 1  # still mapped: the derived view keeps the memory alive
        with self.assertRaises(ValueError):
            view[0]
        with self.assertRaises(ValueError):
            mapping.view()


class BlocksClientTest(FakeServerTest):
    """Many-block transfers and layouts: what reaches the daemon, and when
    nothing does."""

    def setUp(self) -> None:
        super().setUp()
        self.streamed: List[List[xferd_pb2.TransferChunk]] = []

        def stream(chunks: Iterator[Any], context: grpc.ServicerContext) -> Any:
            self.streamed.append(list(chunks))
            return _transfer(common_pb2.TRANSFER_STATE_QUEUED, transfer_id=11)

        self.fake.handlers["SubmitStream"] = stream
        self.fake.handlers["Write"] = lambda r, c: _transfer(common_pb2.TRANSFER_STATE_QUEUED)
        self.fake.handlers["Read"] = lambda r, c: _transfer(common_pb2.TRANSFER_STATE_QUEUED)

    def test_small_block_list_is_one_write(self) -> None:
        handle = self.client.write_blocks("s", "b", "d", np.array([0, 4096], dtype=np.int64),
                                          [8192, 0], block_length=4096, label="kv", timeout=2)
        sent = self.fake.requests[-1]
        self.assertIsInstance(sent, xferd_pb2.WriteRequest)
        self.assertEqual((sent.src_region, sent.peer, sent.dst_region, sent.label, sent.length,
                          sent.timeout.seconds), ("s", "b", "d", "kv", 0, 2))
        self.assertEqual(sent.blocks.list.src_offsets, (0).to_bytes(8, "little") +
                         (4096).to_bytes(8, "little"))
        self.assertEqual(sent.blocks.list.dst_offsets, (8192).to_bytes(8, "little") + bytes(8))
        self.assertEqual((sent.blocks.list.lengths, sent.blocks.list.block_length), (b"", 4096))
        self.assertEqual((handle.id, self.streamed), (7, []))

    def test_large_block_list_streams_as_one_transfer(self) -> None:
        n = 200_000  # 4.8 MB of arrays: five chunks of about 1 MiB
        rng = np.random.default_rng(1)
        src, dst = rng.permutation(n) * 64, np.arange(n, dtype=np.uint64) * 64
        lengths = np.full(n, 64, dtype=np.uint32)
        handle = self.client.read_blocks("b", "remote", "local", src, dst, lengths, wait=True)
        self.assertEqual(handle.id, 11)
        (chunks,) = self.streamed
        self.assertEqual(chunks[0].WhichOneof("part"), "read")
        first = chunks[0].read
        self.assertEqual((first.peer, first.src_region, first.dst_region, first.wait),
                         ("b", "remote", "local", True))
        self.assertEqual({c.WhichOneof("part") for c in chunks[1:]}, {"more_blocks"})
        parts = [first.blocks.list] + [c.more_blocks.list for c in chunks[1:]]
        self.assertEqual(len(parts), 5)
        self.assertTrue(all(c.ByteSize() < (1 << 20) + 1024 for c in chunks))
        for field, array in (("src_offsets", src), ("dst_offsets", dst), ("lengths", lengths)):
            self.assertEqual(b"".join(getattr(p, field) for p in parts),
                             array.astype("<u8").tobytes(), field)
        self.assertNotIn("Read", [type(r).__name__ for r in self.fake.requests[:-1]])

    def test_bad_arrays_are_refused_before_any_rpc(self) -> None:
        cases = [
            (([0, -4096], [0, 0]), {"block_length": 8}, "src_offsets[1] is -4096"),
            (([0.5], [0]), {"block_length": 8}, "src_offsets[0] is 0.5"),
            ((np.array([0.0]), [0]), {"block_length": 8}, "dtype float64"),
            (([0, 8], [0]), {"block_length": 8}, "src_offsets has 2, dst_offsets has 1"),
            (([0], [0]), {}, "not neither"),
            (([0], [0], [8]), {"block_length": 8}, "not both"),
            (([0], [0], [8, 8]), {}, "lengths has 2"),
        ]
        for args, kwargs, message in cases:
            for method in (self.client.write_blocks, self.client.read_blocks):
                with self.subTest(method=method.__name__, message=message):
                    with self.assertRaisesRegex(ValueError, re.escape(message)):
                        method("s", "b", "d", *args, **kwargs)  # type: ignore[operator]
        with self.assertRaisesRegex(ValueError, "src_indices"):
            self.client.write_indexed("l1", "b", "l2", [-1], [0])
        with self.assertRaisesRegex(ValueError, "runs is empty"):
            self.client.read_strided("b", "s", "d", [])
        self.assertEqual((self.fake.requests, self.streamed), ([], []))

    def test_daemon_errors_name_the_block(self) -> None:
        self.fake.handlers["Write"] = lambda r, c: c.abort(
            grpc.StatusCode.OUT_OF_RANGE, "block #1: destination range [8, 16) exceeds ...")
        with self.assertRaises(xferd.OutOfRange) as raised:
            self.client.write_blocks("s", "b", "d", [0, 8], [0, 8], block_length=8)
        self.assertTrue(raised.exception.message.startswith("block #1: "))
        self.fake.handlers["SubmitStream"] = lambda it, c: c.abort(
            grpc.StatusCode.INVALID_ARGUMENT, "block #731512: ...")
        with self.assertRaises(xferd.InvalidArgument) as raised:  # 1.6 MB: streamed
            self.client.write_blocks("s", "b", "d", np.arange(100_000), np.arange(100_000),
                                     block_length=1)
        self.assertEqual(raised.exception.message, "block #731512: ...")

    def test_contiguous_read_strided_and_indexed(self) -> None:
        self.client.read("b", "remote", "local", 100, src_offset=5, dst_offset=6)
        sent = self.fake.requests[-1]
        self.assertIsInstance(sent, xferd_pb2.ReadRequest)
        self.assertEqual((sent.peer, sent.src_region, sent.dst_region, sent.length,
                          sent.src_offset, sent.dst_offset, sent.HasField("blocks")),
                         ("b", "remote", "local", 100, 5, 6, False))
        runs = [xferd.Strided(0, 0, 4096, 4096, 16384, 8), xferd.Strided(1, 2, 3, 4, 5, 6)]
        self.client.write_strided("s", "b", "d", runs)
        sent = self.fake.requests[-1]
        self.assertEqual(list(sent.blocks.strided.runs), [r.to_proto() for r in runs])
        layout = xferd.Layout(name="pages_b", peer="b", region="d", block_length=4096, blocks=9)
        self.client.write_indexed("pages_a", "b", layout, np.array([3, 1]), [0, 8])
        sent = self.fake.requests[-1]
        self.assertIsInstance(sent, xferd_pb2.WriteRequest)
        self.assertEqual((sent.peer, sent.src_region, sent.dst_region), ("b", "", ""))
        self.assertEqual((sent.blocks.layout.src_layout, sent.blocks.layout.dst_layout,
                          sent.blocks.layout.src_indices, sent.blocks.layout.dst_indices),
                         ("pages_a", "pages_b", bytes([3, 0, 0, 0, 1, 0, 0, 0]),
                          bytes([0, 0, 0, 0, 8, 0, 0, 0])))
        self.client.read_indexed("b", layout, "pages_a", [0], [1], wait=True)
        self.assertIsInstance(self.fake.requests[-1], xferd_pb2.ReadRequest)
        self.assertEqual(self.fake.requests[-1].peer, "b")
        self.assertEqual(self.fake.requests[-1].blocks.layout.src_layout, "pages_b")

    def test_layouts(self) -> None:
        self.fake.handlers["PrepareLayout"] = lambda r, c: xferd_pb2.Layout(
            name=r.name, peer=r.peer, region=r.region, block_length=r.block_length,
            blocks=r.count or len(r.offsets) // 8)
        local = self.client.prepare_layout("kv", "cache", 4096, count=16, start=8192)
        sent = self.fake.requests[-1]
        self.assertEqual((sent.start, sent.stride, sent.count, sent.offsets, sent.peer),
                         (8192, 4096, 16, b"", ""))
        self.assertEqual(local, xferd.Layout("kv", None, "cache", 4096, 16))
        remote = self.client.prepare_layout("kv_b", "cache", 512, [0, 4096, 1024], peer="b")
        sent = self.fake.requests[-1]
        self.assertEqual((sent.offsets, sent.count, sent.peer),
                         (b"".join(v.to_bytes(8, "little") for v in (0, 4096, 1024)), 0, "b"))
        self.assertEqual((remote.peer, remote.blocks), ("b", 3))
        for kwargs in ({}, {"offsets": [0], "count": 1}):
            with self.assertRaisesRegex(ValueError, "give either offsets or count"):
                self.client.prepare_layout("x", "cache", 8, **kwargs)  # type: ignore[arg-type]
        with self.assertRaisesRegex(ValueError, r"offsets\[0\] is -1"):
            self.client.prepare_layout("x", "cache", 8, [-1])
        self.fake.handlers["ListLayouts"] = lambda r, c: xferd_pb2.ListLayoutsResponse(layouts=[
            xferd_pb2.Layout(name="kv", region="cache", block_length=4096, blocks=16)])
        self.assertEqual(self.client.layouts(), [local])
        self.fake.handlers["DeleteLayout"] = lambda r, c: c.abort(
            grpc.StatusCode.NOT_FOUND, "no layout named 'zz'")
        with self.assertRaises(xferd.NotFound):
            self.client.delete_layout("zz")

    def test_transfer_and_event_conversions(self) -> None:
        t = _transfer(common_pb2.TRANSFER_STATE_DONE)
        t.direction, t.blocks = xferd_pb2.Transfer.DIRECTION_READ, 1000
        converted = xferd.Transfer.from_proto(t)
        self.assertEqual((converted.direction, converted.blocks), ("read", 1000))
        event = xferd.RegionEvent.from_proto(xferd_pb2.RegionEvent(
            kind=xferd_pb2.RegionEvent.KIND_LANDED, blocks=7, bytes=700, read=True))
        self.assertEqual((event.kind, event.blocks, event.bytes, event.read),
                         ("landed", 7, 700, True))


class TlsConfigTest(unittest.TestCase):
    """Client-side mTLS settings (the handshake itself: the integration tests)."""

    def test_cert_and_key_go_together(self) -> None:
        with self.assertRaises(ValueError):
            xferd.TlsConfig(ca="/dev/null", cert="/dev/null").credentials()
        self.assertIsInstance(xferd.TlsConfig(ca="/dev/null").credentials(),
                              grpc.ChannelCredentials)

    def test_from_env_and_server_name(self) -> None:
        saved = {k: os.environ.pop(k, None) for k in ("XFERD_TLS_CA", "XFERD_TLS_CERT",
                                                       "XFERD_TLS_KEY")}
        try:
            self.assertIsNone(xferd.TlsConfig.from_env())
            os.environ.update(XFERD_TLS_CA="ca.pem", XFERD_TLS_CERT="c.pem", XFERD_TLS_KEY="k")
            self.assertEqual(xferd.TlsConfig.from_env(), xferd.TlsConfig("ca.pem", "c.pem", "k"))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
        self.assertEqual(xferd.TlsConfig("ca", server_name="b").channel_options(),
                         [("grpc.ssl_target_name_override", "b")])


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
