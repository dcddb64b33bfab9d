"""`Client`: the Xferd service of one daemon in Pythonic form, blocking.

Each method runs the operation of its name in `xferd.operations` (which
builds the requests, checks them and converts the replies, and holds the
methods' docstrings), making its calls on the caller's thread.
"""

from __future__ import annotations

from typing import (Any, Callable, Concatenate, Iterable, List, Mapping, Optional, ParamSpec,
                    Sequence, Tuple, TypeVar, Union)

import threading
import time

import grpc

from xferd import requests
from xferd.errors import DeadlineExceeded, from_rpc_error
from xferd.handles import RegionWatch, TransferHandle
from xferd.models import Transfer, WriteSpec
from xferd.operations import (DEFAULT_RPC_TIMEOUT, Call, ClientBase, Op, Operations,
                              described_by)
from xferd.ring_requests import LINGER_MAX_BYTES
from xferd.ring_layout import OP_READ, OP_WRITE
from xferd.rings import RingRequest
from xferd.tls import TlsConfig
from xferd.v1 import xferd_pb2

__all__ = ["Client", "DEFAULT_RPC_TIMEOUT"]

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(op: Callable[Concatenate[Operations, P], Op[T]]
              ) -> Callable[Concatenate["Client", P], T]:
    """The Client method that runs `op` and returns its result."""

    @described_by(op)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._run(op(self._ops, *args, **kwargs))

    return method


def _starting(op: Callable[Concatenate[Operations, P], Op[Transfer]]
              ) -> Callable[Concatenate["Client", P], TransferHandle]:
    """The Client method that runs `op` and returns a handle on the
    transfer whose snapshot it returns."""

    @described_by(op)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> TransferHandle:
        return TransferHandle(self, self._run(op(self._ops, *args, **kwargs)))

    return method


def _ranged(op: Callable[Concatenate[Operations, P], Op[Transfer]], opcode: int
            ) -> Callable[Concatenate["Client", P], TransferHandle]:
    """write() or read(): as _starting(op), straight through the rings when
    they carry the call (ClientBase._ring_range)."""

    @described_by(op)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> TransferHandle:
        start = self._ring_range(op, opcode, args, kwargs)
        if start is None:
            return TransferHandle(self, self._run(op(self._ops, *args, **kwargs)))
        return TransferHandle(self, self._ring_call(*start))

    return method


class Client(ClientBase[RegionWatch]):
    """A connection to one xferd daemon.

    `target` is "host:port" or "unix:/path/to/socket"; `tls` gives the PEM
    files for a daemon's TCP address when it requires mTLS. Methods raise an
    `xferd.XferdError` subclass (NotFound, InvalidArgument, ...) carrying the
    daemon's status code and message. Thread-safe. Use as a context manager,
    or call close(): it cancels open watches, unmaps the SHM buffers of regions
    it returned and closes the channel.
    """

    def __init__(self, target: str, rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
                 options: Sequence[Tuple[str, Any]] = (), tls: Optional[TlsConfig] = None,
                 linger: float = requests.DEFAULT_LINGER, rings: bool = True) -> None:
        """Opens a channel to `target`; nothing is sent until the first call.

        Args:
            target: "host:port" or "unix:/path".
            rpc_timeout: Bound in seconds on each unary call.
            options: Extra gRPC channel options.
            tls: mTLS files (for a "host:port" target of a daemon with
                [tls]); None: a plain channel (the unix socket is always plain).
            linger: Seconds (0 to 1) a write or read without wait lets the
                daemon hold its reply for the transfer's end: a transfer done
                by then comes back finished and `handle.wait()` returns
                without a call, so `write(...).wait()` costs what
                `write(..., wait=True)` does. Only transfers of at most 1 MiB
                linger (a larger one returns once queued, so a loop queueing
                large writes never waits for each). 0: return once queued.
            rings: Over a unix socket, send writes and reads through the
                daemon's request rings (shared memory, no gRPC call) when it
                serves them (`rings_open` says so after the first). Results
                and errors are those of gRPC; requests the rings cannot
                carry exactly go over gRPC. False: gRPC only.
        """
        super().__init__(target, rpc_timeout, options, tls, linger, grpc, rings)
        self._rings_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Client({self.target!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Cancels watches, unmaps SHM buffers, closes the channel. Idempotent."""
        watches = self._closing()
        if watches is None:
            return
        for watch in watches:
            watch.close()
        self._mappings.close()
        self._channel.close()
        with self._rings_lock:
            self._rings_wanted = False
            if self._rings is not None:
                self._rings.close()
                self._rings = None

    def _run(self, op: Op[T]) -> T:
        """Makes `op`'s calls one after the other on this thread; returns
        its result. gRPC errors become XferdError."""
        reply: Any = None
        while True:
            try:
                call = op.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result
            reply = self._invoke(call)

    def _invoke(self, call: Call) -> Any:
        if self._rings_wanted and call.method in ("Write", "Read"):
            self._try_rings()
        start = self._ring_call_start(call)
        if start is not None:
            return self._ring_call(*start)
        try:
            return getattr(self.stub, call.method)(call.request, timeout=call.timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    def _try_rings(self) -> None:
        """Opens the rings once, at the first write or read."""
        with self._rings_lock:
            if not self._rings_wanted:
                return
            self._rings_wanted = False
            try:
                node = self.stub.GetNodeInfo(xferd_pb2.GetNodeInfoRequest(),
                                             timeout=self.rpc_timeout)
            except grpc.RpcError:
                return  # the call itself will say what is wrong
            self._open_rings(node)

    def _ring_call(self, r: RingRequest, deadline: Optional[float], linger: float
                   ) -> Transfer:
        """A write or read through the rings, waiting as its gRPC call does:
        for the end with wait, else for the queued notice and then up to
        `linger` for the end."""
        rings = self._rings
        assert rings is not None
        user_data = rings.submit(r)
        done = rings.wait(user_data, r.queued_notice, deadline)
        if done.queued and linger > 0 and done.length <= LINGER_MAX_BYTES:
            try:
                done = rings.wait(user_data, False, time.monotonic() + linger)
            except DeadlineExceeded:
                pass  # still running: its queued snapshot, as gRPC's linger returns
        elif done.queued:
            rings.forget(user_data)  # followed by id over gRPC, if at all
        return self._ring_transfer(r, done)

    # The calls, in xferd.operations' order; their docstrings are there.

    register_region = _blocking(Operations.register_region)
    register_array = _blocking(Operations.register_array)
    deregister_region = _blocking(Operations.deregister_region)
    set_region_acl = _blocking(Operations.set_region_acl)
    regions = _blocking(Operations.regions)
    region = _blocking(Operations.region)

    def watch_region(self, name: str, timeout: Optional[float] = None,
                     ranges: bool = False) -> RegionWatch:
        """Subscribes to a region's events; returns once subscribed.

        Transfers started after this returns are all reported by the watch.
        Close the watch (or use it as a context manager) when done.
        `ranges`: landed events of many-block transfers carry their ranges
        (`RegionEvent.ranges`); the region must have `landed_ranges`.

        Raises:
            NotFound: no such region.
            FailedPrecondition: `ranges` on a region without landed_ranges.
            TimeoutError: no confirmation within `timeout` (default rpc_timeout).
        """
        call = self.stub.WatchRegion(xferd_pb2.WatchRegionRequest(name=name, ranges=ranges))
        return self._watched(RegionWatch(call, self.rpc_timeout if timeout is None else timeout))

    connect_peer = _blocking(Operations.connect_peer)
    peers = _blocking(Operations.peers)
    disconnect_peer = _blocking(Operations.disconnect_peer)

    write = _ranged(Operations.write, OP_WRITE)
    read = _ranged(Operations.read, OP_READ)
    write_blocks = _starting(Operations.write_blocks)
    read_blocks = _starting(Operations.read_blocks)
    write_strided = _starting(Operations.write_strided)
    read_strided = _starting(Operations.read_strided)
    write_indexed = _starting(Operations.write_indexed)
    read_indexed = _starting(Operations.read_indexed)

    prepare_layout = _blocking(Operations.prepare_layout)
    delete_layout = _blocking(Operations.delete_layout)
    layouts = _blocking(Operations.layouts)

    @described_by(Operations.submit_batch)
    def submit_batch(self, writes: Iterable[Union[WriteSpec, Mapping[str, Any]]]
                     ) -> List[TransferHandle]:
        return [TransferHandle(self, t) for t in self._run(self._ops.submit_batch(writes))]

    transfer = _blocking(Operations.transfer)
    handle = _starting(Operations.handle)
    transfers = _blocking(Operations.transfers)
    cancel = _blocking(Operations.cancel)

    node_info = _blocking(Operations.node_info)
    nodes = _blocking(Operations.nodes)
    find_region = _blocking(Operations.find_region)
    stats = _blocking(Operations.stats)
    devices = _blocking(Operations.devices)
