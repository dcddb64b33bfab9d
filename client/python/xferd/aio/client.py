"""`xferd.aio.Client`: the Xferd service of one daemon for asyncio.

Every method is the coroutine of the `xferd.Client` method of the same name,
with the same arguments, checks, results and errors: both run the
operations of `xferd.operations` (which hold the docstrings). Only making
the calls differs: here they are awaited on grpc.aio.
"""

from __future__ import annotations

from typing import (Any, Callable, Concatenate, Coroutine, Iterable, List, Mapping, Optional,
                    ParamSpec, Sequence, Tuple, TypeVar, Union)

import asyncio
import time

import grpc
import grpc.aio

from xferd import requests
from xferd.aio.handles import RegionWatch, TransferHandle
from xferd.aio.rings import AioRings
from xferd.errors import from_rpc_error
from xferd.models import Transfer, WriteSpec
from xferd.operations import (DEFAULT_RPC_TIMEOUT, Call, ClientBase, Op, Operations,
                              described_by)
from xferd.ring_layout import OP_READ, OP_WRITE
from xferd.rings import RingRequest
from xferd.tls import TlsConfig
from xferd.v1 import xferd_pb2

__all__ = ["Client"]

P = ParamSpec("P")
T = TypeVar("T")


def _awaiting(op: Callable[Concatenate[Operations, P], Op[T]]
              ) -> Callable[Concatenate["Client", P], Coroutine[Any, Any, T]]:
    """The Client coroutine that runs `op` and returns its result."""

    @described_by(op)
    async def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._run(op(self._ops, *args, **kwargs))

    return method


def _starting(op: Callable[Concatenate[Operations, P], Op[Transfer]]
              ) -> Callable[Concatenate["Client", P], Coroutine[Any, Any, TransferHandle]]:
    """The Client coroutine that runs `op` and returns a handle on the
    transfer whose snapshot it returns."""

    @described_by(op)
    async def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> TransferHandle:
        return TransferHandle(self, await self._run(op(self._ops, *args, **kwargs)))

    return method


def _ranged(op: Callable[Concatenate[Operations, P], Op[Transfer]], opcode: int
            ) -> Callable[Concatenate["Client", P], Coroutine[Any, Any, TransferHandle]]:
    """write() or read(): as _starting(op), straight through the rings when
    they carry the call (ClientBase._ring_range)."""

    @described_by(op)
    async def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> TransferHandle:
        start = (None if self._aio_rings is None
                 else self._ring_range(op, opcode, args, kwargs))
        if start is None:
            return TransferHandle(self, await self._run(op(self._ops, *args, **kwargs)))
        return TransferHandle(self, await self._ring_call(*start))

    return method


class Client(ClientBase[RegionWatch]):
    """An asyncio connection to one xferd daemon.

    Create it inside the event loop that uses it (`async with
    xferd.aio.Client(target) as c:`); any number of that loop's tasks may
    share it. Cancelling a task cancels the call it awaits, never a
    transfer. `await close()` cancels watches, unmaps SHM buffers (views
    then raise) and closes the channel. Arguments as for `xferd.Client`.
    """

    def __init__(self, target: str, rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
                 options: Sequence[Tuple[str, Any]] = (), tls: Optional[TlsConfig] = None,
                 linger: float = requests.DEFAULT_LINGER, rings: bool = True) -> None:
        """Opens a grpc.aio channel to `target`; nothing is sent yet.
        Arguments as for xferd.Client: with `rings`, writes and reads wait
        for their completions on the loop (the doorbell watched by
        loop.add_reader), no thread per request."""
        super().__init__(target, rpc_timeout, options, tls, linger, grpc.aio, rings)
        self._aio_rings: Optional[AioRings] = None
        self._rings_opening: Optional["asyncio.Future[None]"] = None

    def __repr__(self) -> str:
        return f"aio.Client({self.target!r})"

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancels watches, unmaps SHM buffers, closes the channel. Idempotent."""
        watches = self._closing()
        if watches is None:
            return
        for watch in watches:
            await watch.close()
        self._mappings.close()
        await self._channel.close()
        self._rings_wanted = False
        if self._aio_rings is not None:
            self._aio_rings.close()
            self._aio_rings = None
            self._rings = None

    async def _run(self, op: Op[T]) -> T:
        """Awaits `op`'s calls one after the other; returns its result.
        gRPC errors become XferdError."""
        reply: Any = None
        while True:
            try:
                call = op.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result
            reply = await self._invoke(call)

    async def _invoke(self, call: Call) -> Any:
        if call.method in ("Write", "Read") and (self._rings_wanted
                                                 or self._rings_opening is not None):
            await self._try_rings()
        start = self._ring_call_start(call)
        if start is not None and self._aio_rings is not None:
            return await self._ring_call(*start)
        try:
            return await getattr(self.stub, call.method)(call.request, timeout=call.timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def _ring_call(self, r: RingRequest, deadline: Optional[float], linger: float
                         ) -> Transfer:
        """A write or read through the rings, waiting on the loop as its
        gRPC call does (AioRings.call)."""
        assert self._aio_rings is not None
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self._ring_transfer(r, await self._aio_rings.call(r, timeout, linger))

    async def _try_rings(self) -> None:
        """Opens the rings once, at the first write or read; the writes and
        reads that come meanwhile wait for the outcome."""
        if self._rings_opening is not None:
            await asyncio.shield(self._rings_opening)
            return
        self._rings_wanted = False
        self._rings_opening = asyncio.get_running_loop().create_future()
        try:
            node = await self.stub.GetNodeInfo(xferd_pb2.GetNodeInfoRequest(),
                                               timeout=self.rpc_timeout)
            self._open_rings(node)
            if self._rings is not None:
                self._aio_rings = AioRings(self._rings, asyncio.get_running_loop())
        except grpc.RpcError:
            pass  # the call itself will say what is wrong
        finally:
            self._rings_opening.set_result(None)
            self._rings_opening = None

    # The calls, in xferd.operations' order; their docstrings are there.

    register_region = _awaiting(Operations.register_region)
    register_array = _awaiting(Operations.register_array)
    deregister_region = _awaiting(Operations.deregister_region)
    set_region_acl = _awaiting(Operations.set_region_acl)
    regions = _awaiting(Operations.regions)
    region = _awaiting(Operations.region)

    def watch_region(self, name: str, timeout: Optional[float] = None,
                     ranges: bool = False) -> RegionWatch:
        """As xferd.Client.watch_region(); use `async with` (or await it)."""
        call = self.stub.WatchRegion(xferd_pb2.WatchRegionRequest(name=name, ranges=ranges))
        return self._watched(RegionWatch(call, self.rpc_timeout if timeout is None else timeout))

    connect_peer = _awaiting(Operations.connect_peer)
    peers = _awaiting(Operations.peers)
    disconnect_peer = _awaiting(Operations.disconnect_peer)

    write = _ranged(Operations.write, OP_WRITE)
    read = _ranged(Operations.read, OP_READ)
    write_blocks = _starting(Operations.write_blocks)
    read_blocks = _starting(Operations.read_blocks)
    write_strided = _starting(Operations.write_strided)
    read_strided = _starting(Operations.read_strided)
    write_indexed = _starting(Operations.write_indexed)
    read_indexed = _starting(Operations.read_indexed)

    prepare_layout = _awaiting(Operations.prepare_layout)
    delete_layout = _awaiting(Operations.delete_layout)
    layouts = _awaiting(Operations.layouts)

    @described_by(Operations.submit_batch)
    async def submit_batch(self, writes: Iterable[Union[WriteSpec, Mapping[str, Any]]]
                           ) -> List[TransferHandle]:
        return [TransferHandle(self, t) for t in await self._run(self._ops.submit_batch(writes))]

    transfer = _awaiting(Operations.transfer)
    handle = _starting(Operations.handle)
    transfers = _awaiting(Operations.transfers)
    cancel = _awaiting(Operations.cancel)

    node_info = _awaiting(Operations.node_info)
    nodes = _awaiting(Operations.nodes)
    find_region = _awaiting(Operations.find_region)
    stats = _awaiting(Operations.stats)
    devices = _awaiting(Operations.devices)
