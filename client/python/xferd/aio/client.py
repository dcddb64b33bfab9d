"""`xferd.aio.Client`: the Xferd service of one daemon for asyncio.

Every method is the coroutine of the `xferd.Client` method of the same name,
with the same arguments, checks, results and errors (see its docstrings):
the requests are built by `xferd.requests`, the replies become the
dataclasses of `xferd.models`. Only running the calls differs: on grpc.aio.
"""

from __future__ import annotations

import threading
import weakref
from typing import (Any, Callable, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import grpc
import grpc.aio

from xferd import requests
from xferd.aio.handles import RegionWatch, TransferHandle
from xferd.blocks import Integers, Strided
from xferd.client import DEFAULT_RPC_TIMEOUT
from xferd.errors import NotFound, from_rpc_error
from xferd.models import (ClusterNode, DirectoryRegion, Layout, NodeInfo, Peer, RdmaDevice,
                          Region, Stats, Transfer, WriteSpec)
from xferd.shm import Mappings
from xferd.tls import TlsConfig
from xferd.v1 import xferd_pb2, xferd_pb2_grpc

__all__ = ["Client"]

# _call's default: the client's rpc_timeout (None means no deadline).
_RPC_TIMEOUT = object()

_Options = Sequence[Tuple[str, Any]]


class Client:
    """An asyncio connection to one xferd daemon.

    Create it inside the event loop that uses it (`async with
    xferd.aio.Client(target) as c:`); any number of that loop's tasks may
    share it. Cancelling a task cancels the call it awaits, never a
    transfer. `await close()` cancels watches, unmaps SHM buffers (views
    then raise) and closes the channel. Arguments as for `xferd.Client`.
    """

    def __init__(self, target: str, rpc_timeout: float = DEFAULT_RPC_TIMEOUT,
                 options: _Options = (), tls: Optional[TlsConfig] = None,
                 linger: float = requests.DEFAULT_LINGER) -> None:
        """Opens a grpc.aio channel to `target`; nothing is sent yet.
        Arguments as for xferd.Client."""
        if not 0 <= linger <= 1:
            raise ValueError(f"linger must be between 0 and 1 s, not {linger}")
        self.target = target
        self.rpc_timeout = rpc_timeout
        self.linger = linger
        if tls is not None and not target.startswith("unix:"):
            self._channel = grpc.aio.secure_channel(
                target, tls.credentials(), options=list(options) + tls.channel_options())
        else:
            self._channel = grpc.aio.insecure_channel(target, options=list(options))
        #: The generated stub (grpc.aio), for calls this class does not wrap.
        self.stub = xferd_pb2_grpc.XferdStub(self._channel)
        self._lock = threading.Lock()
        self._mappings = Mappings()
        self._watches: "weakref.WeakSet[RegionWatch]" = weakref.WeakSet()
        self._closed = False

    def __repr__(self) -> str:
        return f"aio.Client({self.target!r})"

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancels watches, unmaps SHM buffers, closes the channel. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            watches = list(self._watches)
        for watch in watches:
            await watch.close()
        self._mappings.close()
        await self._channel.close()

    async def _call(self, method: Callable[..., Any], request: Any,
                    timeout: Union[float, None, object] = _RPC_TIMEOUT) -> Any:
        """Runs a unary (or client-streaming) call; gRPC errors become
        XferdError. `timeout` defaults to rpc_timeout; None is no deadline."""
        try:
            return await method(request,
                                timeout=self.rpc_timeout if timeout is _RPC_TIMEOUT else timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    async def _pages(self, method: Callable[..., Any], request: Any, field: str,
                     limit: int = 0) -> List[Any]:
        pager = requests.Pager(request, field, limit)
        while pager.add(await self._call(method, pager.request)):
            pass
        return pager.items

    async def _start(self, request: requests.TransferRequest,
                     chunks: Optional[Iterator[xferd_pb2.Blocks]] = None) -> TransferHandle:
        method, payload, timeout = requests.submission(request, chunks, self.rpc_timeout,
                                                       self.linger)
        transfer = await self._call(getattr(self.stub, method), payload, timeout)
        return TransferHandle(self, Transfer.from_proto(transfer))

    def _region(self, message: xferd_pb2.Region) -> Region:
        return Region.from_proto(message, self._mappings.open(message))

    # ------------------------------------------------------------ regions --

    async def register_region(self, name: str, size: int, backing: str = "anonymous",
                              remote_write: bool = False, remote_read: bool = False,
                              file_path: Optional[str] = None, create: bool = False,
                              hugepages: bool = False, allowed_peers: Iterable[str] = (),
                              landed_ranges: bool = False,
                              numa_node: Optional[int] = None) -> Region:
        """As xferd.Client.register_region()."""
        request = requests.register_region_request(
            name, size, backing, remote_write, remote_read, file_path, create, hugepages,
            allowed_peers, landed_ranges, numa_node)
        return self._region(await self._call(self.stub.RegisterRegion, request))

    async def register_array(self, name: str, like: Any, fill: bool = True,
                             remote_write: bool = False, remote_read: bool = False,
                             allowed_peers: Iterable[str] = (),
                             landed_ranges: bool = False) -> Region:
        """As xferd.Client.register_array()."""
        from xferd import arrays  # numpy is optional: imported on use

        region = await self.register_region(
            name, arrays.nbytes_of(like), backing="shm", remote_write=remote_write,
            remote_read=remote_read, allowed_peers=allowed_peers, landed_ranges=landed_ranges)
        if fill:
            region.fill(like)
        return region

    async def set_region_acl(self, name: str, allowed_peers: Iterable[str]) -> Region:
        """As xferd.Client.set_region_acl()."""
        request = xferd_pb2.SetRegionAclRequest(name=name, allowed_peers=list(allowed_peers))
        return self._region(await self._call(self.stub.SetRegionAcl, request))

    async def deregister_region(self, name: str, force: bool = False) -> int:
        """As xferd.Client.deregister_region(): views of it then raise."""
        request = xferd_pb2.DeregisterRegionRequest(name=name, force=force)
        response = await self._call(self.stub.DeregisterRegion, request)
        self._mappings.close(name)
        return int(response.cancelled_transfers)

    async def regions(self) -> List[Region]:
        """As xferd.Client.regions()."""
        return [self._region(r) for r in await self._pages(
            self.stub.ListRegions, xferd_pb2.ListRegionsRequest(), "regions")]

    async def region(self, name: str) -> Region:
        """As xferd.Client.region()."""
        for region in await self.regions():
            if region.name == name:
                return region
        raise NotFound(grpc.StatusCode.NOT_FOUND, f"no region named '{name}'")

    def watch_region(self, name: str, timeout: Optional[float] = None,
                     ranges: bool = False) -> RegionWatch:
        """As xferd.Client.watch_region(); use `async with` (or await it)."""
        call = self.stub.WatchRegion(xferd_pb2.WatchRegionRequest(name=name, ranges=ranges))
        watch = RegionWatch(call, self.rpc_timeout if timeout is None else timeout)
        with self._lock:
            self._watches.add(watch)
        return watch

    # -------------------------------------------------------------- peers --

    async def connect_peer(self, address: str, timeout: Optional[float] = None) -> Peer:
        """As xferd.Client.connect_peer()."""
        request, bound = requests.connect_peer_request(address, timeout)
        return Peer.from_proto(await self._call(self.stub.ConnectPeer, request, bound))

    async def peers(self) -> List[Peer]:
        """As xferd.Client.peers()."""
        return [Peer.from_proto(p) for p in await self._pages(
            self.stub.ListPeers, xferd_pb2.ListPeersRequest(), "peers")]

    async def disconnect_peer(self, peer: str) -> int:
        """As xferd.Client.disconnect_peer()."""
        request = xferd_pb2.DisconnectPeerRequest(peer=peer)
        return int((await self._call(self.stub.DisconnectPeer, request)).failed_transfers)

    # ---------------------------------------------------------- transfers --

    async def write(self, src_region: str, peer: str, dst_region: str, length: int,
                    src_offset: int = 0, dst_offset: int = 0, slice_size: int = 0,
                    timeout: Optional[float] = None, label: str = "",
                    wait: bool = False) -> TransferHandle:
        """As xferd.Client.write()."""
        return await self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, length=length, src_offset=src_offset,
            dst_offset=dst_offset, slice_size=slice_size, timeout=timeout, label=label,
            wait=wait))

    async def read(self, peer: str, src_region: str, dst_region: str, length: int,
                   src_offset: int = 0, dst_offset: int = 0, slice_size: int = 0,
                   timeout: Optional[float] = None, label: str = "",
                   wait: bool = False) -> TransferHandle:
        """As xferd.Client.read()."""
        return await self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, length=length, src_offset=src_offset,
            dst_offset=dst_offset, slice_size=slice_size, timeout=timeout, label=label,
            wait=wait))

    async def write_blocks(self, src_region: str, peer: str, dst_region: str,
                           src_offsets: Integers, dst_offsets: Integers,
                           lengths: Optional[Integers] = None, *,
                           block_length: Optional[int] = None, slice_size: int = 0,
                           timeout: Optional[float] = None, label: str = "",
                           wait: bool = False) -> TransferHandle:
        """As xferd.Client.write_blocks()."""
        chunks = requests.block_list(src_offsets, dst_offsets, lengths, block_length)
        return await self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait), chunks)

    async def read_blocks(self, peer: str, src_region: str, dst_region: str,
                          src_offsets: Integers, dst_offsets: Integers,
                          lengths: Optional[Integers] = None, *,
                          block_length: Optional[int] = None, slice_size: int = 0,
                          timeout: Optional[float] = None, label: str = "",
                          wait: bool = False) -> TransferHandle:
        """As xferd.Client.read_blocks()."""
        chunks = requests.block_list(src_offsets, dst_offsets, lengths, block_length)
        return await self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait), chunks)

    async def write_strided(self, src_region: str, peer: str, dst_region: str,
                            runs: Union[Strided, Sequence[Strided]], *, slice_size: int = 0,
                            timeout: Optional[float] = None, label: str = "",
                            wait: bool = False) -> TransferHandle:
        """As xferd.Client.write_strided()."""
        return await self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait), requests.strided_blocks(runs))

    async def read_strided(self, peer: str, src_region: str, dst_region: str,
                           runs: Union[Strided, Sequence[Strided]], *, slice_size: int = 0,
                           timeout: Optional[float] = None, label: str = "",
                           wait: bool = False) -> TransferHandle:
        """As xferd.Client.read_strided()."""
        return await self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait), requests.strided_blocks(runs))

    async def write_indexed(self, src_layout: Union[str, Layout], peer: str,
                            dst_layout: Union[str, Layout], src_indices: Integers,
                            dst_indices: Integers, *, slice_size: int = 0,
                            timeout: Optional[float] = None, label: str = "",
                            wait: bool = False) -> TransferHandle:
        """As xferd.Client.write_indexed()."""
        return await self._start(requests.transfer_request(
            "write", peer, "", "", slice_size=slice_size, timeout=timeout, label=label,
            wait=wait), requests.layout_blocks(src_layout, dst_layout, src_indices, dst_indices))

    async def read_indexed(self, peer: str, src_layout: Union[str, Layout],
                           dst_layout: Union[str, Layout], src_indices: Integers,
                           dst_indices: Integers, *, slice_size: int = 0,
                           timeout: Optional[float] = None, label: str = "",
                           wait: bool = False) -> TransferHandle:
        """As xferd.Client.read_indexed()."""
        return await self._start(requests.transfer_request(
            "read", peer, "", "", slice_size=slice_size, timeout=timeout, label=label,
            wait=wait), requests.layout_blocks(src_layout, dst_layout, src_indices, dst_indices))

    # ------------------------------------------------------------ layouts --

    async def prepare_layout(self, name: str, region: str, block_length: int,
                             offsets: Optional[Integers] = None, *, start: int = 0,
                             stride: Optional[int] = None, count: Optional[int] = None,
                             peer: Optional[str] = None) -> Layout:
        """As xferd.Client.prepare_layout()."""
        request = requests.prepare_layout_request(name, region, block_length, offsets, start,
                                                  stride, count, peer)
        return Layout.from_proto(await self._call(self.stub.PrepareLayout, request))

    async def delete_layout(self, name: str) -> None:
        """As xferd.Client.delete_layout()."""
        await self._call(self.stub.DeleteLayout, xferd_pb2.DeleteLayoutRequest(name=name))

    async def layouts(self) -> List[Layout]:
        """As xferd.Client.layouts()."""
        response = await self._call(self.stub.ListLayouts, xferd_pb2.ListLayoutsRequest())
        return [Layout.from_proto(layout) for layout in response.layouts]

    async def submit_batch(self, writes: Iterable[Union[WriteSpec, Mapping[str, Any]]]
                           ) -> List[TransferHandle]:
        """As xferd.Client.submit_batch()."""
        response = await self._call(self.stub.SubmitBatch, requests.batch_request(writes))
        return [TransferHandle(self, Transfer.from_proto(t)) for t in response.transfers]

    async def transfer(self, transfer_id: int) -> Transfer:
        """As xferd.Client.transfer()."""
        request = xferd_pb2.GetTransferRequest(id=transfer_id)
        return Transfer.from_proto(await self._call(self.stub.GetTransfer, request))

    async def handle(self, transfer_id: int) -> TransferHandle:
        """As xferd.Client.handle()."""
        return TransferHandle(self, await self.transfer(transfer_id))

    async def transfers(self, include_finished: bool = False, batch_id: int = 0,
                        limit: int = 0) -> List[Transfer]:
        """As xferd.Client.transfers()."""
        request = xferd_pb2.ListTransfersRequest(include_finished=include_finished,
                                                 batch_id=batch_id)
        return [Transfer.from_proto(t) for t in
                await self._pages(self.stub.ListTransfers, request, "transfers", limit)]

    async def cancel(self, transfer_id: int) -> Transfer:
        """As xferd.Client.cancel()."""
        request = xferd_pb2.CancelTransferRequest(id=transfer_id)
        return Transfer.from_proto(await self._call(self.stub.CancelTransfer, request))

    # ----------------------------------------------------- node and stats --

    async def node_info(self) -> NodeInfo:
        """As xferd.Client.node_info()."""
        return NodeInfo.from_proto(await self._call(self.stub.GetNodeInfo,
                                                    xferd_pb2.GetNodeInfoRequest()))

    async def nodes(self) -> List[ClusterNode]:
        """As xferd.Client.nodes()."""
        reply = await self._call(self.stub.ListNodes, xferd_pb2.ListNodesRequest())
        return [ClusterNode.from_proto(n) for n in reply.nodes]

    async def find_region(self, name: str) -> List[DirectoryRegion]:
        """As xferd.Client.find_region()."""
        reply = await self._call(self.stub.FindRegion, xferd_pb2.FindRegionRequest(name=name))
        return [DirectoryRegion.from_proto(r) for r in reply.regions]

    async def stats(self) -> Stats:
        """As xferd.Client.stats()."""
        return Stats.from_proto(await self._call(self.stub.GetStats,
                                                 xferd_pb2.GetStatsRequest()))

    async def devices(self) -> List[RdmaDevice]:
        """As xferd.Client.devices()."""
        reply = await self._call(self.stub.ListDevices, xferd_pb2.ListDevicesRequest())
        return [RdmaDevice.from_proto(d) for d in reply.devices]
