"""The request messages of the client's calls, built and checked once
(ValueError before anything is sent), with their deadlines: what
`xferd.operations` sends for both clients, and what the handles send.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Union

import grpc
from google.protobuf import duration_pb2

from xferd import blocks
from xferd.blocks import Integers, Strided
from xferd.errors import from_rpc_error
from xferd.models import Layout, WriteSpec
from xferd.v1 import common_pb2, xferd_pb2

__all__ = [
    "BACKINGS",
    "PRIORITIES",
    "DEFAULT_LINGER",
    "TransferRequest",
    "batch_request",
    "block_list",
    "call_bound",
    "connect_peer_request",
    "duration",
    "layout_blocks",
    "prepare_layout_request",
    "register_region_request",
    "split_blocks",
    "submission",
    "stream_messages",
    "wait_error",
    "transfer_request",
    "waiting_timeout",
]

BACKINGS = {
    "anonymous": common_pb2.REGION_BACKING_ANONYMOUS,
    "shm": common_pb2.REGION_BACKING_SHM,
    "file": common_pb2.REGION_BACKING_FILE,
}

#: A transfer's class by name (docs/priorities.md).
PRIORITIES = {
    "critical": xferd_pb2.PRIORITY_CRITICAL,
    "normal": xferd_pb2.PRIORITY_NORMAL,
    "bulk": xferd_pb2.PRIORITY_BULK,
    "background": xferd_pb2.PRIORITY_BACKGROUND,
}

# The daemon's own bound on a handshake when ConnectPeer gives none.
_DEFAULT_CONNECT_TIMEOUT = 10.0
# Slack on top of a server-side bound, so the daemon's answer arrives first.
RPC_SLACK = 5.0

TransferRequest = Union[xferd_pb2.WriteRequest, xferd_pb2.ReadRequest]


#: Seconds a reply without wait waits for its transfer's end (WriteRequest
#: linger): a small transfer's handle then starts out finished, and its
#: wait() costs no call. 0 replies as soon as the daemon queued it.
DEFAULT_LINGER = 0.01

def duration(seconds: float) -> duration_pb2.Duration:
    """A protobuf Duration of `seconds` (rounded to nanoseconds)."""
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(round(seconds * 1e9)))
    return d


def wait_error(error: grpc.RpcError, transfer_id: int, timeout: Optional[float]) -> Exception:
    """What a failed WaitTransfer or WatchTransfer call raises: TimeoutError
    when the caller's bound passed (the transfer goes on), else the
    XferdError of the daemon's status."""
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return TimeoutError(f"transfer {transfer_id} has not ended after {timeout} s "
                            "(it goes on: cancel it to stop it)")
    return from_rpc_error(error)


def register_region_request(name: str, size: int, backing: str, remote_write: bool,
                            remote_read: bool, file_path: Optional[str], create: bool,
                            hugepages: bool, allowed_peers: Iterable[str],
                            landed_ranges: bool, numa_node: Optional[int] = None,
                            shared_with: Iterable[str] = ()
                            ) -> xferd_pb2.RegisterRegionRequest:
    """A RegisterRegionRequest; ValueError for an unknown backing."""
    if backing not in BACKINGS:
        raise ValueError(f"backing must be one of {sorted(BACKINGS)}, not {backing!r}")
    request = xferd_pb2.RegisterRegionRequest(
        name=name, size=size, backing=BACKINGS[backing],
        access=common_pb2.RegionAccess(remote_write=remote_write, remote_read=remote_read),
        file_path=file_path or "", create=create, hugepages=hugepages,
        allowed_peers=list(allowed_peers), landed_ranges=landed_ranges,
        shared_with=list(shared_with))
    if numa_node is not None:
        request.numa_node = numa_node
    return request


def connect_peer_request(address: str, timeout: Optional[float]
                         ) -> Tuple[xferd_pb2.ConnectPeerRequest, float]:
    """A ConnectPeerRequest and the bound on the call: the handshake's own
    bound (the daemon's default without one) plus slack."""
    request = xferd_pb2.ConnectPeerRequest(address=address)
    if timeout is not None:
        request.timeout.CopyFrom(duration(timeout))
    return request, (_DEFAULT_CONNECT_TIMEOUT if timeout is None else timeout) + RPC_SLACK


def transfer_request(direction: str, peer: str, src_region: str, dst_region: str,
                     length: int = 0, src_offset: int = 0, dst_offset: int = 0,
                     slice_size: int = 0, timeout: Optional[float] = None, label: str = "",
                     wait: bool = False, priority: str = "normal",
                     verify: Optional[bool] = None,
                     expected_checksums: Optional[Integers] = None) -> TransferRequest:
    """A WriteRequest ("write") or ReadRequest ("read"): both have these
    fields, and a read `expected_checksums` (packed bytes as a verified
    write's Transfer.checksums, or integers). ValueError for an unknown
    priority or malformed checksums."""
    if priority not in PRIORITIES:
        raise ValueError(f"priority must be one of {list(PRIORITIES)}, not {priority!r}")
    message = xferd_pb2.WriteRequest if direction == "write" else xferd_pb2.ReadRequest
    request = message(peer=peer, src_region=src_region, dst_region=dst_region, length=length,
                      src_offset=src_offset, dst_offset=dst_offset, slice_size=slice_size,
                      label=label, wait=wait, priority=PRIORITIES[priority])
    if timeout is not None:
        request.timeout.CopyFrom(duration(timeout))
    if verify is not None:
        request.verify = verify
    if expected_checksums is not None:
        request.expected_checksums = _checksums(expected_checksums)
    return request


def _checksums(values: Integers) -> bytes:
    """Expected checksums as the wire carries them: packed bytes pass as
    they are (Transfer.checksums), integers are packed."""
    if isinstance(values, (bytes, bytearray)):
        if len(values) % 8:
            raise ValueError(f"expected_checksums is {len(values)} bytes: packed checksums "
                             f"are 8 bytes each (pass a verified transfer's checksums)")
        return bytes(values)
    return blocks.pack_u64(values, "expected_checksums")


def _write_request(spec: WriteSpec) -> TransferRequest:
    return transfer_request("write", spec.peer, spec.src_region, spec.dst_region,
                            length=spec.length, src_offset=spec.src_offset,
                            dst_offset=spec.dst_offset, slice_size=spec.slice_size,
                            timeout=spec.timeout, label=spec.label, priority=spec.priority,
                            verify=spec.verify)


def batch_request(writes: Iterable[Union[WriteSpec, Mapping[str, Any]]]
                  ) -> xferd_pb2.SubmitBatchRequest:
    """A SubmitBatchRequest of WriteSpecs or mappings of write()'s arguments."""
    specs = [w if isinstance(w, WriteSpec) else WriteSpec(**w) for w in writes]
    return xferd_pb2.SubmitBatchRequest(writes=[_write_request(s) for s in specs])


def waiting_timeout(request: TransferRequest, rpc_timeout: Optional[float]) -> Optional[float]:
    """The bound on a Write/Read/SubmitStream call (see call_bound)."""
    return call_bound(request.wait, float(request.timeout.ToNanoseconds()) / 1e9
                      if request.HasField("timeout") else None, rpc_timeout)


def call_bound(wait: bool, timeout: Optional[float], rpc_timeout: Optional[float]
               ) -> Optional[float]:
    """The bound on submitting a transfer: rpc_timeout, or for one that
    waits, its own deadline `timeout` plus rpc_timeout (none without)."""
    if not wait:
        return rpc_timeout
    if timeout is None:
        return None
    return timeout + (rpc_timeout or 0.0)


def submission(request: TransferRequest, chunks: Optional[Iterator[xferd_pb2.Blocks]],
               rpc_timeout: Optional[float], linger: float
               ) -> Tuple[str, Any, Optional[float]]:
    """How both clients submit `request` (and its blocks' `chunks`): the stub
    method's name (Write, Read, or SubmitStream when the blocks take more than
    one message), its argument and the call's bound. A request without wait
    lingers `linger` seconds for its transfer's end (see Client)."""
    more = split_blocks(request, chunks)
    if not request.wait and linger > 0:
        request.linger.FromNanoseconds(round(linger * 1e9))
    timeout = waiting_timeout(request, rpc_timeout)
    if more is not None:
        return "SubmitStream", stream_messages(request, more), timeout
    return ("Write" if isinstance(request, xferd_pb2.WriteRequest) else "Read"), request, timeout


def split_blocks(request: TransferRequest, chunks: Optional[Iterator[xferd_pb2.Blocks]]
                 ) -> Optional[Iterator[xferd_pb2.Blocks]]:
    """Puts the first chunk of blocks into `request`; returns the others when
    there are any (then the request goes through SubmitStream), else None."""
    if chunks is None:
        return None
    request.blocks.CopyFrom(next(chunks))
    second = next(chunks, None)
    return None if second is None else itertools.chain([second], chunks)


def stream_messages(request: TransferRequest, more: Iterator[xferd_pb2.Blocks]
                    ) -> Iterator[xferd_pb2.TransferChunk]:
    """The messages of a SubmitStream call: the request, then more blocks."""
    if isinstance(request, xferd_pb2.WriteRequest):
        yield xferd_pb2.TransferChunk(write=request)
    else:
        yield xferd_pb2.TransferChunk(read=request)
    for chunk in more:
        yield xferd_pb2.TransferChunk(more_blocks=chunk)


def _layout_name(layout: Union[str, Layout]) -> str:
    return layout.name if isinstance(layout, Layout) else layout


def block_list(src_offsets: Integers, dst_offsets: Integers, lengths: Optional[Integers],
               block_length: Optional[int]) -> Iterator[xferd_pb2.Blocks]:
    """Packs an explicit block list (ValueError on bad arrays) into chunks."""
    return blocks.list_chunks(
        blocks.pack_u64(src_offsets, "src_offsets"), blocks.pack_u64(dst_offsets, "dst_offsets"),
        None if lengths is None else blocks.pack_u64(lengths, "lengths"), block_length or 0)


def strided_blocks(runs: Union[Strided, Sequence[Strided]]) -> Iterator[xferd_pb2.Blocks]:
    """Packs strided runs (ValueError on bad ones) into chunks."""
    return blocks.strided_chunks(runs)


def layout_blocks(src_layout: Union[str, Layout], dst_layout: Union[str, Layout],
                  src_indices: Integers, dst_indices: Integers) -> Iterator[xferd_pb2.Blocks]:
    """Packs layout indices (ValueError on bad arrays) into chunks."""
    return blocks.layout_chunks(_layout_name(src_layout), _layout_name(dst_layout),
                                blocks.pack_u32(src_indices, "src_indices"),
                                blocks.pack_u32(dst_indices, "dst_indices"))


def prepare_layout_request(name: str, region: str, block_length: int,
                           offsets: Optional[Integers], start: int, stride: Optional[int],
                           count: Optional[int], peer: Optional[str]
                           ) -> xferd_pb2.PrepareLayoutRequest:
    """A PrepareLayoutRequest; ValueError for both or neither of offsets and
    count, or bad offsets."""
    if (offsets is None) == (count is None):
        raise ValueError("give either offsets or count (blocks at start + k * stride), not "
                         + ("both" if count is not None else "neither"))
    request = xferd_pb2.PrepareLayoutRequest(name=name, peer=peer or "", region=region,
                                             block_length=block_length)
    if offsets is not None:
        request.offsets = blocks.pack_u64(offsets, "offsets")
    else:
        request.start, request.count = start, count
        request.stride = block_length if stride is None else stride
    return request
