"""Many-block requests: packing offsets and indices into the little-endian
arrays the daemon reads (`xferd.v1.Blocks`), strided runs, and splitting a
request too large for one message into the chunks of a SubmitStream call.

Offsets are packed from numpy arrays (one vectorised conversion, no Python
object per block) or, without numpy, from array.array, memoryviews and plain
sequences of ints (slower). Bad input raises ValueError naming the argument
and the first bad element, before anything is sent.
"""

from __future__ import annotations

import array
import dataclasses
import sys
from collections import abc
from typing import Any, Iterator, List, NoReturn, Optional, Sequence, Union

from xferd.v1 import xferd_pb2

try:  # numpy is optional: the packing falls back to array.array without it
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the host
    _np = None  # type: ignore[assignment]

__all__ = [
    "STREAM_CHUNK_BYTES",
    "Integers",
    "Strided",
    "pack_u32",
    "pack_u64",
    "list_chunks",
    "strided_chunks",
    "layout_chunks",
]

#: Requests whose arrays exceed this go through SubmitStream in chunks of
#: about this size: far below gRPC's 4 MiB default message limit (and the
#: daemon's 16 MiB), small enough that the daemon starts validating the first
#: chunk while the next is on the wire.
STREAM_CHUNK_BYTES = 1 << 20

#: What offsets and indices may be given as: a 1-D numpy array of integers,
#: any buffer of native integers (array.array, memoryview), or a sequence or
#: iterable of ints.
Integers = Any

# An encoded StridedRun is at most 6 fields of 1 tag byte + a 10-byte varint,
# plus 3 bytes to frame it in the repeated field: a bound, so chunks of runs
# never exceed STREAM_CHUNK_BYTES.
_MAX_RUN_BYTES = 6 * 11 + 3
# Integer formats of the buffer protocol (struct module codes).
_INTEGER_FORMATS = frozenset("bBhHiIlLqQnN")
# array.array type codes of unsigned integers of 4 and 8 bytes on this host.
_UNSIGNED_CODE = {array.array(c).itemsize: c for c in ("L", "I", "Q")}


@dataclasses.dataclass(frozen=True)
class Strided:
    """`count` blocks of `block_length` bytes: block k copies the source's
    [src_start + k * src_stride, + block_length) to the destination's
    [dst_start + k * dst_stride, + block_length).

    A stride equal to block_length is contiguous on that side (e.g. packed
    pages gathered from or scattered into a strided layout).

    Raises:
        ValueError: a negative value, or a block_length or count of 0.
    """

    src_start: int
    dst_start: int
    block_length: int
    src_stride: int
    dst_stride: int
    count: int

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Strided.{field.name} is {value!r}: it must be an int >= 0")
        if self.block_length == 0 or self.count == 0:
            raise ValueError(f"{self}: block_length and count must be > 0")

    def to_proto(self) -> xferd_pb2.StridedRun:
        """The xferd.v1.StridedRun of this run."""
        return xferd_pb2.StridedRun(**dataclasses.asdict(self))


def pack_u64(values: Integers, what: str) -> bytes:
    """`values` as packed little-endian uint64 (8 bytes per value).

    Args:
        values: See `Integers`; a bytes object is refused (it is ambiguous:
            already packed, or one byte per value?).
        what: The argument's name, for error messages ("src_offsets").

    Raises:
        ValueError: not integers, not one-dimensional, or a value < 0 or
            >= 2**64; the message names `what` and the first bad index.
    """
    return _pack(values, what, 8)


def pack_u32(values: Integers, what: str) -> bytes:
    """`values` as packed little-endian uint32 (layout indices); as pack_u64
    with values limited to < 2**32."""
    return _pack(values, what, 4)


def unpack_u64(packed: bytes) -> Any:
    """Packed little-endian uint64 (a RegionEvent's ranges) as a numpy uint64
    array when numpy is importable, else an array.array of unsigned 64-bit
    ints. A trailing partial value is ignored."""
    packed = packed[:len(packed) - len(packed) % 8]
    if _np is not None:
        return _np.frombuffer(packed, dtype="<u8").astype(_np.uint64)
    values = array.array(_UNSIGNED_CODE[8])
    values.frombytes(packed)
    if sys.byteorder == "big":  # pragma: no cover - little-endian hosts only here
        values.byteswap()
    return values


def _pack(values: Integers, what: str, width: int) -> bytes:
    if isinstance(values, (bytes, bytearray, str)):
        _raise_type(what, values, ", not packed bytes")
    if _np is not None and isinstance(values, _np.ndarray):
        return _pack_numpy(values, what, width)
    try:
        view = memoryview(values)
    except TypeError:
        view = None  # not a buffer: a sequence or iterable of ints
    if view is None:
        return _pack_sequence(values, what, width)
    with view:
        return _pack_buffer(view, what, width)


def _pack_numpy(values: Any, what: str, width: int) -> bytes:
    if values.ndim != 1:
        raise ValueError(f"{what} has shape {values.shape}: it must be one-dimensional "
                         f"(flatten it with .ravel())")
    if values.dtype.kind not in "iu":
        raise ValueError(f"{what} has dtype {values.dtype}: it must hold integers "
                         f"(e.g. .astype('uint64'))")
    if values.size:
        limit = (1 << (8 * width)) - 1
        if values.dtype.kind == "i" and values.min() < 0:
            _raise_element(what, values, int(_np.argmax(values < 0)), width)
        if values.dtype.itemsize > width and values.max() > limit:
            _raise_element(what, values, int(_np.argmax(values > limit)), width)
    packed: bytes = values.astype(f"<u{width}", copy=False).tobytes()
    return packed


def _pack_buffer(view: memoryview, what: str, width: int) -> bytes:
    code = view.format.lstrip("@=<")
    if code not in _INTEGER_FORMATS:
        raise ValueError(f"{what} is a buffer of format {view.format!r}: it must hold native "
                         f"integers (e.g. array.array('Q') or a numpy integer array)")
    if view.ndim != 1:
        raise ValueError(f"{what} has shape {view.shape}: it must be one-dimensional")
    if _np is not None:
        return _pack_numpy(_np.asarray(view), what, width)
    return _pack_sequence(view, what, width)


def _pack_sequence(values: Any, what: str, width: int) -> bytes:
    if not isinstance(values, (abc.Sequence, memoryview)):
        if not isinstance(values, abc.Iterable):
            _raise_type(what, values, "")
        values = list(values)  # an iterable: read once, kept to name a bad element
    try:
        packed = array.array(_UNSIGNED_CODE[width], values)
    except (TypeError, OverflowError):
        packed = None  # some element is not an int in range: name the first
    if packed is None:
        bad = next(i for i, value in enumerate(values) if not _fits(value, width))
        _raise_element(what, values, bad, width)
    if sys.byteorder == "big":  # pragma: no cover - little-endian hosts only here
        packed.byteswap()
    return packed.tobytes()


def _raise_type(what: str, values: Any, why: str) -> NoReturn:
    raise ValueError(f"{what} is {type(values).__name__}: pass integers (a numpy array, an "
                     f"array.array or a sequence of ints){why}")


def _fits(value: Any, width: int) -> bool:
    if not hasattr(value, "__index__"):
        return False
    index: int = value.__index__()
    return 0 <= index < (1 << (8 * width))


def _raise_element(what: str, values: Any, index: int, width: int) -> NoReturn:
    value = values[index]
    if not hasattr(value, "__index__"):
        raise ValueError(f"{what}[{index}] is {value!r}: every element must be an int")
    raise ValueError(f"{what}[{index}] is {int(value)}: every element must be >= 0 and "
                     f"< 2**{8 * width}")


def _count(packed: bytes, width: int) -> int:
    return len(packed) // width


def list_chunks(src_offsets: bytes, dst_offsets: bytes, lengths: Optional[bytes],
                block_length: int,
                chunk_bytes: int = STREAM_CHUNK_BYTES) -> Iterator[xferd_pb2.Blocks]:
    """Splits a packed block list into Blocks messages of about `chunk_bytes`.

    Every chunk repeats block_length, so each is a valid BlockList alone.

    Raises:
        ValueError: the arrays hold different counts, or both or neither of
            lengths and block_length are given.
    """
    count = _count(src_offsets, 8)
    counts = {"src_offsets": count, "dst_offsets": _count(dst_offsets, 8)}
    if lengths is not None:
        counts["lengths"] = _count(lengths, 8)
    if len(set(counts.values())) != 1:
        raise ValueError("the block arrays must have one element per block: " +
                         ", ".join(f"{name} has {n}" for name, n in counts.items()))
    if (lengths is None) == (block_length <= 0):
        raise ValueError("give either lengths (one per block) or block_length > 0 "
                         f"(every block), not {'both' if lengths is not None else 'neither'}")
    per_chunk = max(1, chunk_bytes // (8 * len(counts)))
    for first in range(0, max(count, 1), per_chunk):
        part = slice(8 * first, 8 * (first + per_chunk))
        yield xferd_pb2.Blocks(list=xferd_pb2.BlockList(
            src_offsets=src_offsets[part], dst_offsets=dst_offsets[part],
            lengths=b"" if lengths is None else lengths[part],
            block_length=0 if lengths is not None else block_length))


def strided_chunks(runs: Union[Strided, Sequence[Strided]],
                   chunk_bytes: int = STREAM_CHUNK_BYTES) -> Iterator[xferd_pb2.Blocks]:
    """Splits strided runs into Blocks messages of at most `chunk_bytes`.

    Raises:
        ValueError: no runs, or an element that is not a Strided.
    """
    run_list: List[Strided] = [runs] if isinstance(runs, Strided) else list(runs)
    if not run_list:
        raise ValueError("runs is empty: give at least one Strided run")
    for index, run in enumerate(run_list):
        if not isinstance(run, Strided):
            raise ValueError(f"runs[{index}] is {type(run).__name__}: it must be a Strided")
    per_chunk = max(1, chunk_bytes // _MAX_RUN_BYTES)
    for first in range(0, len(run_list), per_chunk):
        part = run_list[first:first + per_chunk]
        yield xferd_pb2.Blocks(strided=xferd_pb2.StridedBlocks(runs=[r.to_proto() for r in part]))


def layout_chunks(src_layout: str, dst_layout: str, src_indices: bytes, dst_indices: bytes,
                  chunk_bytes: int = STREAM_CHUNK_BYTES) -> Iterator[xferd_pb2.Blocks]:
    """Splits packed layout indices into Blocks messages of about
    `chunk_bytes`; every chunk names both layouts.

    Raises:
        ValueError: src_indices and dst_indices hold different counts.
    """
    count = _count(src_indices, 4)
    if count != _count(dst_indices, 4):
        raise ValueError("the index arrays must have one element per block: src_indices has "
                         f"{count}, dst_indices has {_count(dst_indices, 4)}")
    per_chunk = max(1, chunk_bytes // 8)
    for first in range(0, max(count, 1), per_chunk):
        part = slice(4 * first, 4 * (first + per_chunk))
        yield xferd_pb2.Blocks(layout=xferd_pb2.LayoutBlocks(
            src_layout=src_layout, dst_layout=dst_layout,
            src_indices=src_indices[part], dst_indices=dst_indices[part]))
