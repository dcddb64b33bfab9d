"""Every call of the Xferd service, written once for both clients.

An operation is a generator: it builds and checks its requests (ValueError
before anything is sent), yields each as a `Call`, receives the reply and
returns the result as the dataclasses of `xferd.models`. It does no I/O:
`xferd.Client` runs its calls on the caller's thread, `xferd.aio.Client`
awaits them on grpc.aio; that is all the two clients do differently.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
import time
import weakref
from typing import (Any, Callable, Dict, Generator, Generic, Iterable, Iterator, List,
                    Literal, Mapping, Optional, Sequence, Tuple, TypeVar, Union)

import grpc

from xferd import requests
from xferd.blocks import Integers, Strided
from xferd.errors import NotFound, XferdError, error_for
from xferd.ring_requests import range_request, ring_request, transfer_of
from xferd.rings import ORDERED_CPU, LocalRings, RingCompletion, RingRequest
from xferd.models import (ClusterNode, DirectoryRegion, Layout, NodeInfo, Peer, RdmaDevice,
                          Region, Stats, Transfer, Transport, WriteSpec, transport_name)
from xferd.local_socket import local_socket_for
from xferd.shm import Mappings
from xferd.tls import TlsConfig
from xferd.v1 import xferd_pb2, xferd_pb2_grpc

__all__ = ["DEFAULT_RPC_TIMEOUT", "Call", "ClientBase", "Op", "Operations", "described_by"]

#: Bound (seconds) on unary calls that do not wait for a transfer.
DEFAULT_RPC_TIMEOUT = 30.0

T = TypeVar("T")
W = TypeVar("W")
F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Call:
    """One unary (or client-streaming) call of the Xferd service.

    Attributes:
        method: The stub's method ("Write", "ListRegions", ...).
        request: Its argument: a request message, or an iterator of them
            for SubmitStream.
        timeout: The call's bound in seconds; None: no deadline.
    """

    method: str
    request: Any
    timeout: Optional[float]


#: An operation: yields Calls, is sent each one's reply, returns a T.
Op = Generator[Call, Any, T]


def described_by(op: Callable[..., Any]) -> Callable[[F], F]:
    """Gives a client's method the name, docstring and arguments of the
    operation it runs (its return annotation is the client's own)."""

    def describe(method: F) -> F:
        functools.update_wrapper(method, op, updated=())
        del method.__wrapped__  # type: ignore[attr-defined]
        method.__signature__ = (  # type: ignore[attr-defined]
            inspect.signature(op).replace(return_annotation=inspect.Signature.empty))
        return method

    return describe


class ClientBase(Generic[W]):
    """What both clients hold: the target and settings, the channel and stub,
    the SHM mappings of regions they returned, their open watches (W) and
    the operations; and closing once."""

    def __init__(self, target: str, rpc_timeout: float, options: Sequence[Tuple[str, Any]],
                 tls: Optional[TlsConfig], linger: float, channels: Any,
                 rings: bool = True) -> None:
        """Opens a channel of `channels` (grpc or grpc.aio) to `target`;
        arguments as for xferd.Client. Nothing is sent yet."""
        if not 0 <= linger <= 1:
            raise ValueError(f"linger must be between 0 and 1 s, not {linger}")
        self.target = target
        self.rpc_timeout = rpc_timeout
        self.linger = linger
        if tls is not None and not target.startswith("unix:"):
            self._channel = channels.secure_channel(
                target, tls.credentials(), options=list(options) + tls.channel_options())
        else:
            self._channel = channels.insecure_channel(target, options=list(options))
        #: The generated stub, for calls the client does not wrap.
        self.stub: Any = xferd_pb2_grpc.XferdStub(self._channel)
        self._lock = threading.Lock()
        self._mappings = Mappings(target, local_socket_for(target),
                                  functools.partial(_node_info_once, target, tls, rpc_timeout))
        self._watches: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._closed = False
        self._ops = Operations(self)
        # The request rings: tried at the first write or read over a unix
        # socket (`_try_rings`), then None when the daemon serves none.
        self._rings_wanted = rings and target.startswith("unix:")
        self._rings: Optional[LocalRings] = None
        self._transport: Transport = "unknown"
        self._default_slice = 0

    @property
    def rings_open(self) -> bool:
        """Writes and reads go through the daemon's request rings (shared
        memory on its local socket) rather than gRPC calls."""
        return self._rings is not None

    @property
    def ring_requests(self) -> int:
        """Writes and reads sent through the rings so far."""
        return 0 if self._rings is None else self._rings.submitted

    def _open_rings(self, node: xferd_pb2.NodeInfo) -> None:
        """Opens the rings of the daemon `node` describes, if it serves any:
        its local socket is beside the unix socket this client reached. A
        failure leaves gRPC in use: slower, never wrong."""
        if not node.local_socket or not ORDERED_CPU:  # no rings there, or not here
            return
        path = local_socket_for(self.target)
        if path is None:
            return
        try:
            self._rings = LocalRings(path, client_name=f"python pid {os.getpid()}")
        except XferdError:
            return
        self._transport = transport_name(node.transport)
        self._default_slice = node.default_slice_size

    def _ring_call_start(self, call: Call) -> Optional[Tuple[RingRequest, Optional[float], float]]:
        """For a Write or Read `call` the rings can carry exactly: its ring
        request, deadline (time.monotonic()) and linger in seconds; else None."""
        if self._rings is None or call.method not in ("Write", "Read"):
            return None
        r = ring_request(call.request, self._default_slice)
        if r is None or len(r.arrays) > self._rings.geometry.buffer_bytes:
            return None
        deadline = None if call.timeout is None else time.monotonic() + call.timeout
        linger = (call.request.linger.ToNanoseconds() / 1e9
                  if call.request.HasField("linger") else 0.0)
        return r, deadline, linger

    def _ring_range(self, op: Callable[..., Any], opcode: int, args: Tuple[Any, ...],
                    kwargs: Mapping[str, Any]
                    ) -> Optional[Tuple[RingRequest, Optional[float], float]]:
        """For write() or read() (`op`, its ring opcode) called with `args`
        and `kwargs`: its ring request, deadline and linger as
        _ring_call_start gives them, made without the request message and
        the operation's machinery when the rings are open and carry it
        exactly (most small transfers: this is half a ring write's client
        side). None: run `op` (it opens the rings at the first call, and
        raises the errors of bad arguments)."""
        if self._rings is None:
            return None
        names, defaults = _parameters(op)
        if len(args) > len(names):
            return None
        values = dict(defaults)
        values.update(zip(names, args))
        values.update(kwargs)
        if len(values) != len(names):  # an unknown keyword: op's TypeError
            return None
        if values["verify"] is not None or values.get("expected_checksums") is not None:
            return None  # the generic path: ring_request() says if the ring carries them
        r = range_request(opcode, values["peer"], values["src_region"], values["dst_region"],
                          values["length"], values["src_offset"], values["dst_offset"],
                          values["slice_size"], values["timeout"], values["label"],
                          values["wait"], values["priority"])
        if r is None:
            return None
        wait = values["wait"]
        bound = requests.call_bound(wait, values["timeout"], self.rpc_timeout)
        return (r, None if bound is None else time.monotonic() + bound,
                0.0 if wait else self.linger)

    def _ring_transfer(self, r: RingRequest, done: RingCompletion) -> Transfer:
        return transfer_of(r, done, self._transport, self._default_slice)

    def _watched(self, watch: W) -> W:
        """Keeps `watch` for close() to cancel; returns it."""
        with self._lock:
            self._watches.add(watch)
        return watch

    def _closing(self) -> Optional[List[W]]:
        """Marks the client closed; the watches to close, or None when it was
        already closed. The caller closes them, then unmaps and closes the
        channel (`_mappings.close()`, `_channel.close()`)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            return list(self._watches)


class Operations:
    """The service's calls as operations (see the module's docstring), with
    the docstrings of the blocking client's methods: each xferd.Client
    method runs the operation of its name, each xferd.aio.Client method
    awaits it."""

    def __init__(self, client: ClientBase[Any]) -> None:
        """Reads `client`'s rpc_timeout and linger at each call, and opens
        the SHM regions it returns in its mappings."""
        self._client = client

    def _call(self, method: str, request: Any) -> Call:
        return Call(method, request, self._client.rpc_timeout)

    def _pages(self, method: str, request: Any, field: str, limit: int = 0) -> Op[List[Any]]:
        """Every page of a paged List call (up to `limit` items if > 0), in
        the server's order: the request is sent again with the page token of
        each reply until a reply has none."""
        items: List[Any] = []
        while True:
            if limit:
                request.page_size = limit - len(items)
            page = yield self._call(method, request)
            items.extend(getattr(page, field))
            if not page.next_page_token or (limit and len(items) >= limit):
                return items
            request.page_token = page.next_page_token

    def _start(self, request: requests.TransferRequest,
               chunks: Optional[Iterator[xferd_pb2.Blocks]] = None) -> Op[Transfer]:
        """Submits one transfer: Write or Read, or SubmitStream when `chunks`
        (its blocks) has more than one. Returns its submission snapshot."""
        method, payload, timeout = requests.submission(
            request, chunks, self._client.rpc_timeout, self._client.linger)
        reply = yield Call(method, payload, timeout)
        # A ring call's reply is already a Transfer (xferd.ring_requests).
        return reply if isinstance(reply, Transfer) else Transfer.from_proto(reply)

    def _region(self, message: xferd_pb2.Region) -> Region:
        return Region.from_proto(message, self._client._mappings.open(message))

    # ------------------------------------------------------------ regions --

    def register_region(self, name: str, size: int,
                        backing: Literal["anonymous", "shm", "file"] = "anonymous",
                        remote_write: bool = False, remote_read: bool = False,
                        file_path: Optional[str] = None, create: bool = False,
                        hugepages: bool = False,
                        allowed_peers: Iterable[str] = (),
                        landed_ranges: bool = False,
                        numa_node: Optional[int] = None,
                        shared_with: Iterable[str] = ()) -> Op[Region]:
        """Registers a region named `name` of `size` bytes.

        Args:
            backing: "anonymous" (daemon memory), "shm" (mapped by this client
                through `Region.buffer`) or "file" (`file_path`, absolute;
                size 0 means the file's size; `create` makes it).
            remote_write: Peers may write into it (needed for a destination).
            remote_read: Peers may read from it.
            hugepages: Anonymous regions only.
            allowed_peers: Node ids allowed to resolve it; empty means any.
            landed_ranges: Keep the ranges of many-block transfers landing
                here, for watches that ask (`watch_region(ranges=True)`).
            numa_node: Anonymous and shm regions: allocate the memory on
                this NUMA node (that of the NIC moving it; see devices()).
            shared_with: Other tenants of the daemon that may use it in
                their transfers, watch and map it ("*": all); empty: this
                client's tenant alone (docs/tenants.md).

        Raises:
            InvalidArgument, AlreadyExists, ResourceExhausted, PermissionDenied.
        """
        request = requests.register_region_request(
            name, size, backing, remote_write, remote_read, file_path, create, hugepages,
            allowed_peers, landed_ranges, numa_node, shared_with)
        return self._region((yield self._call("RegisterRegion", request)))

    def register_array(self, name: str, like: Any, fill: bool = True,
                       remote_write: bool = False, remote_read: bool = False,
                       allowed_peers: Iterable[str] = (),
                       landed_ranges: bool = False) -> Op[Region]:
        """Registers an shm region `name` sized for `like` (a numpy array or
        CPU torch tensor) and, with `fill`, copies `like` into it in place.

        `region.numpy(like.dtype, like.shape)` (or `.torch(...)`) is then the
        region as an array. Other arguments as for register_region().

        Raises:
            As register_region().
        """
        from xferd import arrays  # numpy is optional: imported on use

        region = yield from self.register_region(
            name, arrays.nbytes_of(like), backing="shm", remote_write=remote_write,
            remote_read=remote_read, allowed_peers=allowed_peers, landed_ranges=landed_ranges)
        if fill:
            region.fill(like)
        return region

    def deregister_region(self, name: str, force: bool = False) -> Op[int]:
        """Removes a region; returns how many transfers `force` cancelled.

        This client's mappings of the region are closed first.

        Raises:
            NotFound; FailedPrecondition if transfers use it and not `force`.
        """
        request = xferd_pb2.DeregisterRegionRequest(name=name, force=force)
        response = yield self._call("DeregisterRegion", request)
        self._client._mappings.close(name)
        return int(response.cancelled_transfers)

    def set_region_acl(self, name: str, allowed_peers: Iterable[str]) -> Op[Region]:
        """Replaces the region's ACL: the node ids allowed from now on (empty:
        any authenticated peer). Returns the region.

        Peers that resolved it and are left out lose its keys at once (over
        verbs a write with an old key fails and writes nothing); their next
        write is refused with PermissionDenied.

        Raises:
            NotFound; InvalidArgument for an empty node id.
        """
        request = xferd_pb2.SetRegionAclRequest(name=name, allowed_peers=list(allowed_peers))
        return self._region((yield self._call("SetRegionAcl", request)))

    def regions(self) -> Op[List[Region]]:
        """The daemon's regions, sorted by name."""
        pages = yield from self._pages("ListRegions", xferd_pb2.ListRegionsRequest(), "regions")
        return [self._region(r) for r in pages]

    def region(self, name: str) -> Op[Region]:
        """One region by name.

        Raises:
            NotFound: no region of that name.
        """
        for region in (yield from self.regions()):
            if region.name == name:
                return region
        raise NotFound(grpc.StatusCode.NOT_FOUND, f"no region named '{name}'")

    # -------------------------------------------------------------- peers --

    def connect_peer(self, address: str, timeout: Optional[float] = None) -> Op[Peer]:
        """Connects this daemon to the daemon at `address` (idempotent).

        Args:
            timeout: Bound in seconds on the handshake (daemon default: 10 s).

        Raises:
            Unavailable: unreachable; FailedPrecondition: incompatible peer.
        """
        request, bound = requests.connect_peer_request(address, timeout)
        return Peer.from_proto((yield Call("ConnectPeer", request, bound)))

    def peers(self) -> Op[List[Peer]]:
        """The peers this daemon knows, in any state."""
        pages = yield from self._pages("ListPeers", xferd_pb2.ListPeersRequest(), "peers")
        return [Peer.from_proto(p) for p in pages]

    def disconnect_peer(self, peer: str) -> Op[int]:
        """Closes the lanes to `peer` (node id or address); returns the number
        of its transfers that failed because of it.

        Raises:
            NotFound: no such peer.
        """
        request = xferd_pb2.DisconnectPeerRequest(peer=peer)
        return int((yield self._call("DisconnectPeer", request)).failed_transfers)

    # ---------------------------------------------------------- transfers --

    def write(self, src_region: str, peer: str, dst_region: str, length: int,
              src_offset: int = 0, dst_offset: int = 0, slice_size: int = 0,
              timeout: Optional[float] = None, label: str = "",
              wait: bool = False, priority: str = "normal",
              verify: Optional[bool] = None) -> Op[Transfer]:
        """Starts writing `length` bytes of local `src_region` (from
        `src_offset`) into `dst_region` of `peer` (at `dst_offset`).

        Returns once the transfer is queued, or, for at most 1 MiB, once it
        ended if that came within the client's `linger` (then the handle's
        wait() needs no call);
        use the handle to wait, watch or cancel it. With `wait`, returns once it ended instead: one call and
        no stream, the cheapest way to run small writes one after the other;
        the handle's wait() then returns (or raises) at once. `timeout`
        (seconds) is the transfer's own deadline: past it the transfer fails
        with DEADLINE_EXCEEDED. `slice_size` 0 is the daemon's default.
        `priority` is its class: "critical" (goes before everything),
        "normal", "bulk" or "background" (these share what critical leaves
        by the daemon's weights); see docs/priorities.md. `verify` checks
        every block end to end (a CRC-64 taken as the source sent it against
        what landed; None: the daemon's engine.verify): a block that landed
        otherwise fails the transfer with DataLoss naming it, and the
        finished transfer's `checksums` holds one per block, to store beside
        the data (docs/integrity.md).

        Raises:
            NotFound, InvalidArgument, OutOfRange, PermissionDenied,
            Unavailable, ResourceExhausted: the write was refused.
        """
        return (yield from self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, length=length, src_offset=src_offset,
            dst_offset=dst_offset, slice_size=slice_size, timeout=timeout, label=label,
            wait=wait, priority=priority, verify=verify)))

    def read(self, peer: str, src_region: str, dst_region: str, length: int,
             src_offset: int = 0, dst_offset: int = 0, slice_size: int = 0,
             timeout: Optional[float] = None, label: str = "",
             wait: bool = False, priority: str = "normal",
             verify: Optional[bool] = None,
             expected_checksums: Optional[Integers] = None) -> Op[Transfer]:
        """Starts reading (pulling) `length` bytes of `src_region` on `peer`
        (from `src_offset`) into local `dst_region` (at `dst_offset`).

        The peer's region must allow remote_read and list this daemon in its
        ACL; over verbs the peer's CPU does nothing (RDMA READ). A "landed"
        event (read=True) is raised on `dst_region` when the read completes.
        Options and the handle as for write(). `expected_checksums` (a
        verified write's Transfer.checksums, or integers; same blocks and
        slice_size) checks a restore: a block whose bytes differ fails the
        read with DataLoss naming it.

        Raises:
            PermissionDenied: the peer's region does not allow the read.
            NotFound, InvalidArgument, OutOfRange, Unavailable,
            ResourceExhausted: the read was refused.
        """
        return (yield from self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, length=length, src_offset=src_offset,
            dst_offset=dst_offset, slice_size=slice_size, timeout=timeout, label=label,
            wait=wait, priority=priority, verify=verify,
            expected_checksums=expected_checksums)))

    # -------------------------------------------------- many-block transfers --
    #
    # One transfer of many blocks between one local region and one region on
    # the peer: one id, one handle, one "landed" event on the receiving side.
    # Validation is all or nothing: an invalid block refuses the whole request
    # and the error names it ("block #731512: destination range ..."). Requests
    # whose arrays exceed about 1 MiB (xferd.blocks.STREAM_CHUNK_BYTES) go
    # through SubmitStream in chunks: the caller still sees one transfer.
    # Options (slice_size, timeout, label, wait, priority, verify) are those of
    # write(); the reads' expected_checksums that of read().

    def write_blocks(self, src_region: str, peer: str, dst_region: str,
                     src_offsets: Integers, dst_offsets: Integers,
                     lengths: Optional[Integers] = None, *, block_length: Optional[int] = None,
                     slice_size: int = 0, timeout: Optional[float] = None, label: str = "",
                     wait: bool = False, priority: str = "normal",
                     verify: Optional[bool] = None) -> Op[Transfer]:
        """Writes block i of local `src_region` at src_offsets[i] into
        `dst_region` of `peer` at dst_offsets[i], lengths[i] bytes (or
        `block_length` bytes for every block).

        Offsets and lengths are numpy integer arrays (packed without a Python
        object per block), other buffers of integers (array.array) or
        sequences of ints. No two destination blocks may overlap.

        Raises:
            ValueError: bad arrays (not integers, negative, counts that
                differ, both or neither of lengths and block_length); nothing
                was sent.
            InvalidArgument, OutOfRange, NotFound, PermissionDenied,
            Unavailable, ResourceExhausted: the daemon refused the request,
                naming the first invalid block; nothing was written.
        """
        chunks = requests.block_list(src_offsets, dst_offsets, lengths, block_length)
        return (yield from self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait, priority=priority, verify=verify), chunks))

    def read_blocks(self, peer: str, src_region: str, dst_region: str,
                    src_offsets: Integers, dst_offsets: Integers,
                    lengths: Optional[Integers] = None, *, block_length: Optional[int] = None,
                    slice_size: int = 0, timeout: Optional[float] = None, label: str = "",
                    wait: bool = False, priority: str = "normal",
                    verify: Optional[bool] = None,
                    expected_checksums: Optional[Integers] = None) -> Op[Transfer]:
        """Reads block i of `src_region` on `peer` at src_offsets[i] into
        local `dst_region` at dst_offsets[i]; arrays as for write_blocks().

        Raises:
            ValueError: bad arrays; nothing was sent.
            PermissionDenied: the peer's region lacks remote_read or its ACL
                does not list this daemon; nothing was read.
            InvalidArgument, OutOfRange, NotFound, Unavailable: as for
                write_blocks().
        """
        chunks = requests.block_list(src_offsets, dst_offsets, lengths, block_length)
        return (yield from self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait, priority=priority, verify=verify,
            expected_checksums=expected_checksums), chunks))

    def write_strided(self, src_region: str, peer: str, dst_region: str,
                      runs: Union[Strided, Sequence[Strided]], *, slice_size: int = 0,
                      timeout: Optional[float] = None, label: str = "",
                      wait: bool = False, priority: str = "normal",
                      verify: Optional[bool] = None) -> Op[Transfer]:
        """Writes the blocks of one or more `xferd.Strided` runs (taken one
        after the other as one list) from local `src_region` into
        `dst_region` of `peer`.

        Raises:
            ValueError: no runs, or an element that is not a Strided.
            InvalidArgument, OutOfRange, ...: as for write_blocks().
        """
        return (yield from self._start(requests.transfer_request(
            "write", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait, priority=priority, verify=verify),
        requests.strided_blocks(runs)))

    def read_strided(self, peer: str, src_region: str, dst_region: str,
                     runs: Union[Strided, Sequence[Strided]], *, slice_size: int = 0,
                     timeout: Optional[float] = None, label: str = "",
                     wait: bool = False, priority: str = "normal",
                     verify: Optional[bool] = None,
                     expected_checksums: Optional[Integers] = None) -> Op[Transfer]:
        """Reads the blocks of `runs` from `src_region` on `peer` into local
        `dst_region` (src_start/src_stride are on the peer's side).

        Raises:
            As read_blocks().
        """
        return (yield from self._start(requests.transfer_request(
            "read", peer, src_region, dst_region, slice_size=slice_size, timeout=timeout,
            label=label, wait=wait, priority=priority, verify=verify,
            expected_checksums=expected_checksums), requests.strided_blocks(runs)))

    def write_indexed(self, src_layout: Union[str, Layout], peer: str,
                      dst_layout: Union[str, Layout], src_indices: Integers,
                      dst_indices: Integers, *, slice_size: int = 0,
                      timeout: Optional[float] = None, label: str = "",
                      wait: bool = False, priority: str = "normal",
                      verify: Optional[bool] = None) -> Op[Transfer]:
        """Writes block src_indices[i] of local layout `src_layout` into
        block dst_indices[i] of `dst_layout`, a layout of a region on `peer`
        (see prepare_layout()); both layouts have the same block length.

        Layouts are given by name or as returned by prepare_layout(); the
        request carries the indices alone (4 bytes per block per side), the
        regions come from the layouts. Indices are arrays as for
        write_blocks(), each < 2**32.

        Raises:
            ValueError: bad indices or counts that differ; nothing was sent.
            NotFound: no such layout; InvalidArgument: a layout of another
                peer or block length, or an index past a layout's end (the
                block is named); nothing was written.
        """
        return (yield from self._start(requests.transfer_request(
            "write", peer, "", "", slice_size=slice_size, timeout=timeout, label=label,
            wait=wait, priority=priority, verify=verify),
            requests.layout_blocks(src_layout, dst_layout, src_indices, dst_indices)))

    def read_indexed(self, peer: str, src_layout: Union[str, Layout],
                     dst_layout: Union[str, Layout], src_indices: Integers,
                     dst_indices: Integers, *, slice_size: int = 0,
                     timeout: Optional[float] = None, label: str = "",
                     wait: bool = False, priority: str = "normal",
                     verify: Optional[bool] = None,
                     expected_checksums: Optional[Integers] = None) -> Op[Transfer]:
        """Reads block src_indices[i] of `src_layout`, a layout of a region on
        `peer`, into block dst_indices[i] of local layout `dst_layout`.

        Raises:
            As write_indexed(), and PermissionDenied as read_blocks().
        """
        return (yield from self._start(requests.transfer_request(
            "read", peer, "", "", slice_size=slice_size, timeout=timeout, label=label,
            wait=wait, priority=priority, verify=verify,
            expected_checksums=expected_checksums),
            requests.layout_blocks(src_layout, dst_layout, src_indices, dst_indices)))

    # ------------------------------------------------------------ layouts --

    def prepare_layout(self, name: str, region: str, block_length: int,
                       offsets: Optional[Integers] = None, *, start: int = 0,
                       stride: Optional[int] = None, count: Optional[int] = None,
                       peer: Optional[str] = None) -> Op[Layout]:
        """Registers layout `name`: blocks of `block_length` bytes of
        `region`, at `offsets` (integers as for write_blocks()) or, without
        them, `count` blocks at start + k * stride (stride defaults to
        block_length: packed pages). `peer` (node id or address) makes it a
        layout of the peer's region, the destination of write_indexed() or
        the source of read_indexed(); None is a local region.

        Raises:
            ValueError: both or neither of offsets and count, or bad offsets.
            InvalidArgument (names the block), AlreadyExists, NotFound,
            OutOfRange (a block outside the region).
        """
        request = requests.prepare_layout_request(name, region, block_length, offsets, start,
                                                  stride, count, peer)
        return Layout.from_proto((yield self._call("PrepareLayout", request)))

    def delete_layout(self, name: str) -> Op[None]:
        """Removes a layout; transfers already submitted are not affected.

        Raises:
            NotFound: no layout of that name.
        """
        yield self._call("DeleteLayout", xferd_pb2.DeleteLayoutRequest(name=name))

    def layouts(self) -> Op[List[Layout]]:
        """The daemon's prepared layouts."""
        response = yield self._call("ListLayouts", xferd_pb2.ListLayoutsRequest())
        return [Layout.from_proto(layout) for layout in response.layouts]

    def submit_batch(self, writes: Iterable[Union[WriteSpec, Mapping[str, Any]]]
                     ) -> Op[List[Transfer]]:
        """Starts several writes at once, all or nothing.

        Each write is a WriteSpec or a mapping of write()'s arguments. Returns
        one handle per write, in order; they share a batch id.

        Raises:
            XferdError: one write is invalid and none was started; the
                message names the write ("write #i: ...", see `write_index`).
        """
        response = yield self._call("SubmitBatch", requests.batch_request(writes))
        return [Transfer.from_proto(t) for t in response.transfers]

    def transfer(self, transfer_id: int) -> Op[Transfer]:
        """One transfer's current snapshot.

        Raises:
            NotFound: unknown id (or dropped from the daemon's history).
        """
        request = xferd_pb2.GetTransferRequest(id=transfer_id)
        return Transfer.from_proto((yield self._call("GetTransfer", request)))

    def handle(self, transfer_id: int) -> Op[Transfer]:
        """A handle on an existing transfer (e.g. one listed by transfers()).

        Raises:
            NotFound: as transfer().
        """
        return (yield from self.transfer(transfer_id))

    def transfers(self, include_finished: bool = False, batch_id: int = 0,
                  limit: int = 0) -> Op[List[Transfer]]:
        """Transfers in flight (and finished ones with `include_finished`),
        newest first, optionally of one batch; at most `limit` if > 0. The
        daemon sends them in pages; this follows every page."""
        request = xferd_pb2.ListTransfersRequest(include_finished=include_finished,
                                                 batch_id=batch_id)
        pages = yield from self._pages("ListTransfers", request, "transfers", limit)
        return [Transfer.from_proto(t) for t in pages]

    def cancel(self, transfer_id: int) -> Op[Transfer]:
        """Cancels a transfer; a finished one is returned unchanged.

        Raises:
            NotFound: unknown id.
        """
        request = xferd_pb2.CancelTransferRequest(id=transfer_id)
        return Transfer.from_proto((yield self._call("CancelTransfer", request)))

    # ----------------------------------------------------- node and stats --

    def node_info(self) -> Op[NodeInfo]:
        """The daemon's identity, transport and addresses."""
        return NodeInfo.from_proto((yield self._call("GetNodeInfo",
                                                     xferd_pb2.GetNodeInfoRequest())))

    def nodes(self) -> Op[List[ClusterNode]]:
        """Every live daemon of the cluster directory (etcd), with its regions,
        from the daemon's cache of it: while etcd is out of reach, the
        directory as last seen, each other daemon's `state` then "cached".

        Raises:
            FailedPrecondition: the daemon has no [cluster] section.
        """
        reply = yield self._call("ListNodes", xferd_pb2.ListNodesRequest())
        return [ClusterNode.from_proto(n) for n in reply.nodes]

    def find_region(self, name: str) -> Op[List[DirectoryRegion]]:
        """The live daemons' regions called `name`, from the cluster directory
        (the daemon's cache; a name it does not hold is asked of etcd).

        Raises:
            NotFound: no live daemon publishes one.
            FailedPrecondition: as nodes().
            Unavailable: the name is not cached and etcd cannot be reached
                (the message names it).
        """
        reply = yield self._call("FindRegion", xferd_pb2.FindRegionRequest(name=name))
        return [DirectoryRegion.from_proto(r) for r in reply.regions]

    def stats(self) -> Op[Stats]:
        """The daemon's counters."""
        return Stats.from_proto((yield self._call("GetStats", xferd_pb2.GetStatsRequest())))

    def devices(self) -> Op[List[RdmaDevice]]:
        """The RDMA devices of the daemon's host (empty without RDMA), with the
        port and GID the daemon uses marked `in_use`."""
        reply = yield self._call("ListDevices", xferd_pb2.ListDevicesRequest())
        return [RdmaDevice.from_proto(d) for d in reply.devices]


@functools.lru_cache(maxsize=None)
def _parameters(op: Callable[..., Any]) -> Tuple[Tuple[str, ...], Dict[str, Any]]:
    """The names of `op`'s arguments after self, in order, and their defaults."""
    params = list(inspect.signature(op).parameters.values())[1:]
    return (tuple(p.name for p in params),
            {p.name: p.default for p in params if p.default is not inspect.Parameter.empty})


def _node_info_once(target: str, tls: Optional[TlsConfig],
                    timeout: float) -> xferd_pb2.NodeInfo:
    """The daemon's NodeInfo over a short-lived blocking channel of its own,
    so the SHM mappings of either client (blocking or asyncio) can ask it from
    any thread, on first use over TCP.

    Raises:
        XferdError: the call failed (its code and details).
    """
    if tls is not None:
        channel = grpc.secure_channel(target, tls.credentials(), options=tls.channel_options())
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        try:
            info: xferd_pb2.NodeInfo = xferd_pb2_grpc.XferdStub(channel).GetNodeInfo(
                xferd_pb2.GetNodeInfoRequest(), timeout=timeout)
        except grpc.RpcError as e:
            raise error_for(e.code(), e.details()) from None
    return info
