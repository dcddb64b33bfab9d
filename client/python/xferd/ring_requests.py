"""Write and Read requests as ring entries, and completions as the Transfer
snapshots the gRPC calls convert to: what lets both clients send a request
either way with nothing changing for their callers (as the C++ client's
client/cpp/ring_requests.cc does).
"""

from __future__ import annotations

import datetime
import math
import struct
import time
from typing import Any, Optional, Tuple, Union

from xferd import ring_layout as L
from xferd.errors import code_from_number, error_for
from xferd.models import Status, Transfer, Transport
from xferd.requests import PRIORITIES
from xferd.rings import RingCompletion, RingRequest
from xferd.v1 import xferd_pb2

__all__ = ["LINGER_MAX_BYTES", "range_request", "ring_request", "transfer_of"]

#: A reply lingers only for transfers this small (the daemon's rule for its
#: gRPC replies, kLingerMaxBytes): a larger one returns once queued.
LINGER_MAX_BYTES = 1 << 20

_MAX_SLICE_KIB = 0xFFFF
_RUN = struct.Struct("<6Q")
_MAX_NAME_BYTES = 255  # of an interned name (local.proto)
_U64_MAX = (1 << 64) - 1


def ring_request(r: Union[xferd_pb2.WriteRequest, xferd_pb2.ReadRequest],
                 default_slice: int) -> Optional[RingRequest]:
    """The ring entry for `r` (the daemon's default slice size given), or
    None when the ring cannot say it the same (a slice size not whole KiB, a
    timeout beyond 49 days, arrays the daemon would refuse as malformed, a
    layout request that names regions too, a linger with wait, a verified
    request whose checksums might not fit a completion): then it goes over
    gRPC, whose errors say it best."""
    if r.HasField("linger") and r.wait:
        return None
    expected = r.expected_checksums if isinstance(r, xferd_pb2.ReadRequest) else b""
    if len(expected) % 8:
        return None
    if (r.HasField("verify") and r.verify) or expected:
        count = _checksum_count(r, default_slice)
        if count is None or count > _RING_CHECKSUMS:
            return None  # only gRPC returns them all
    out = _entry(L.OP_WRITE if isinstance(r, xferd_pb2.WriteRequest) else L.OP_READ, r.peer,
                 r.src_region, r.dst_region, r.label, r.wait, r.slice_size,
                 r.timeout.ToNanoseconds() if r.HasField("timeout") else None)
    if out is None or r.priority not in _PRIORITY_NAMES:
        return None
    out.priority = r.priority
    if r.HasField("verify"):
        out.verify = r.verify
    out.expected = len(expected) // 8
    if not r.HasField("blocks"):
        out.a, out.b, out.length = r.src_offset, r.dst_offset, r.length
        out.arrays = expected  # a range's only arrays, inline
        return out if _internable(out) else None
    b = r.blocks
    form = b.WhichOneof("form")
    if form == "list":
        n = len(b.list.src_offsets)
        if n % 8 or len(b.list.dst_offsets) != n or len(b.list.lengths) not in (0, n):
            return None
        out.form, out.a, out.b = L.FORM_LIST, n // 8, b.list.block_length
        out.arrays = b.list.src_offsets + b.list.dst_offsets + b.list.lengths
    elif form == "strided":
        out.form, out.a = L.FORM_STRIDED, len(b.strided.runs)
        out.arrays = b"".join(_RUN.pack(x.src_start, x.dst_start, x.block_length, x.src_stride,
                                        x.dst_stride, x.count) for x in b.strided.runs)
    elif form == "layout":
        n = len(b.layout.src_indices)
        if r.src_region or r.dst_region or n % 4 or len(b.layout.dst_indices) != n:
            return None
        out.form, out.a = L.FORM_LAYOUT, n // 4
        out.src, out.dst = b.layout.src_layout, b.layout.dst_layout
        out.arrays = b.layout.src_indices + b.layout.dst_indices
    else:
        return None
    if r.src_offset or r.dst_offset or r.length or out.a == 0:
        return None
    out.arrays += expected
    return out if _internable(out) else None


#: A completion's message slot holds a verified transfer's checksums when
#: there are at most this many (docs/local-rings.md).
_RING_CHECKSUMS = L.MESSAGE_BYTES // 8


def _checksum_count(r: Union[xferd_pb2.WriteRequest, xferd_pb2.ReadRequest],
                    default_slice: int) -> Optional[int]:
    """How many checksums verified `r` returns (one per block, or per slice
    of a block longer than the slice size, as the daemon plans it), counted
    only up to past _RING_CHECKSUMS; None when the client cannot tell cheaply
    (a layout's blocks) or `r` is malformed (gRPC's errors then say why)."""
    slice_size = r.slice_size or default_slice
    if slice_size <= 0:
        return None

    def slices(length: int) -> int:
        return max(1, -(-length // slice_size))

    if not r.HasField("blocks"):
        return slices(r.length)
    b = r.blocks
    form = b.WhichOneof("form")
    if form == "list":
        n = len(b.list.src_offsets) // 8
        if n > _RING_CHECKSUMS:
            return n
        if b.list.block_length:
            return n * slices(b.list.block_length)
        if len(b.list.lengths) != 8 * n:
            return None
        return sum(slices(x) for x in struct.unpack(f"<{n}Q", b.list.lengths))
    if form == "strided":
        count = 0
        for run in b.strided.runs:
            count += run.count * slices(run.block_length)
            if count > _RING_CHECKSUMS:
                break
        return count
    return None


def range_request(opcode: int, peer: Any, src_region: Any, dst_region: Any, length: Any,
                  src_offset: Any, dst_offset: Any, slice_size: Any, timeout: Any, label: Any,
                  wait: Any, priority: Any = "normal") -> Optional[RingRequest]:
    """The ring entry of a write() or read() of one range, from its
    arguments as the caller gave them: what ring_request() makes of the
    message they would become, without building it (a small request's
    fast path). None as ring_request(), and for any argument the message
    would refuse or convert (a negative offset, a str for an int): the
    generic path then raises its error."""
    ints = (length, src_offset, dst_offset, slice_size)  # bool is no offset: type, not isinstance
    if (set(map(type, ints)) != {int} or min(ints) < 0 or max(ints) > _U64_MAX
            or set(map(type, (peer, src_region, dst_region, label))) != {str}
            or type(wait) is not bool
            or not (timeout is None or (type(timeout) in (int, float) and math.isfinite(timeout)))):
        return None
    number = PRIORITIES.get(priority) if type(priority) is str else None
    out = _entry(opcode, peer, src_region, dst_region, label, wait, slice_size,
                 None if timeout is None else round(timeout * 1e9))
    if out is None or number is None:
        return None
    out.priority = number
    out.a, out.b, out.length = src_offset, dst_offset, length
    return out if _internable(out) else None


def _entry(opcode: int, peer: str, src: str, dst: str, label: str, wait: bool,
           slice_size: int, timeout_ns: Optional[int]) -> Optional[RingRequest]:
    """The entry's fields every form shares, or None when the ring cannot
    say them (see ring_request)."""
    if slice_size % 1024 or slice_size // 1024 > _MAX_SLICE_KIB:
        return None
    if ":" in peer:  # an address: the snapshot names the peer by node id, which gRPC knows
        return None
    out = RingRequest(opcode=opcode, peer=peer, label=label, src=src, dst=dst,
                      slice_kib=slice_size // 1024, queued_notice=not wait, detached=not wait)
    if timeout_ns is not None:
        ms = -(-timeout_ns // 1_000_000)  # whole milliseconds, rounded up
        if ms <= 0 or ms > 0xFFFFFFFF:
            return None
        out.timeout_ms = ms
    return out


def _internable(r: RingRequest) -> bool:
    """The names are there and of a length the daemon interns: a missing or
    overlong one goes over gRPC, whose error names the field."""
    sizes: Tuple[int, ...]
    if (r.peer + r.src + r.dst + r.label).isascii():  # a character is a byte
        sizes = (len(r.peer), len(r.src), len(r.dst), len(r.label))
    else:
        sizes = tuple(len(n.encode()) for n in (r.peer, r.src, r.dst, r.label))
    return min(sizes[:3]) > 0 and max(sizes) <= _MAX_NAME_BYTES


# Priority numbers to the snapshot's names (0, unset: the default, normal).
_PRIORITY_NAMES = {0: "normal", **{number: name for name, number in PRIORITIES.items()}}

_STATES = {
    L.STATE_QUEUED: "queued",
    L.STATE_DONE: "done",
    L.STATE_CANCELLED: "cancelled",
}


def transfer_of(r: RingRequest, c: RingCompletion, transport: Transport,
                default_slice: int) -> Transfer:
    """The snapshot completion `c` of request `r` stands for, with the
    daemon's transport ("tcp", "verbs") and default slice size: the
    Transfer a gRPC reply converts to, built straight from the completion
    (no protobuf message between, which would cost more than the rest of a
    write's client side).

    Raises:
        XferdError: the refusal `c` is (no transfer started), with the
            daemon's code and message, as the gRPC call raises it.
    """
    if c.transfer_id == 0:
        raise error_for(c.code, c.message)
    now = time.time_ns()
    queued = c.state == L.STATE_QUEUED
    submitted = now if queued else now - c.duration_ns
    rng = r.form == L.FORM_RANGE
    named = r.form != L.FORM_LAYOUT
    return Transfer._of(dict(
        id=c.transfer_id, state=_STATES.get(c.state, "failed"),
        src_region=r.src if named else "", src_offset=r.a if rng else 0, peer=r.peer,
        dst_region=r.dst if named else "", dst_offset=r.b if rng else 0, length=c.length,
        bytes_done=c.bytes_done,
        slice_size=r.slice_kib << 10 if r.slice_kib else default_slice, slices=c.slices,
        transport=transport,
        error=Status(code_from_number(c.code), c.message) if c.code != 0 else None,
        submitted_at=_datetime(submitted), finished_at=None if queued else _datetime(now),
        batch_id=0, label=r.label, direction="read" if r.opcode == L.OP_READ else "write",
        blocks=c.blocks, priority=_PRIORITY_NAMES[r.priority], verify=c.verified,
        checksums=c.checksums))


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _datetime(ns: int) -> datetime.datetime:
    """`ns` since the epoch as a gRPC snapshot's time converts (UTC, to the
    microsecond)."""
    return _EPOCH + datetime.timedelta(microseconds=ns // 1000)
