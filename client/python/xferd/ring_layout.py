"""The request rings' shared memory as daemon/base/ring_layout.h lays it out.

The daemon hands a local client one memfd holding a header page, the
submission ring (SQ), the completion ring (CQ), a message slot per CQ entry
and a buffer area for block arrays. This module mirrors that header's
constants and entry formats as `struct` formats (little-endian, as the
daemon's x86-64/aarch64 hosts are); `xferd.rings` uses them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = [
    "MAGIC", "VERSION", "PAGE", "MAX_EXT", "MESSAGE_BYTES", "SQE", "CQE", "GEOMETRY",
    "Geometry", "OP_WRITE", "OP_READ", "FORM_RANGE", "FORM_LIST", "FORM_STRIDED",
    "FORM_LAYOUT", "FLAG_QUEUED_NOTICE", "FLAG_DETACHED", "FLAG_VERIFY", "FLAG_NO_VERIFY",
    "STATE_QUEUED", "STATE_DONE", "STATE_FAILED", "STATE_CANCELLED", "CQE_MORE",
    "CQE_VERIFIED", "CQE_CHECKSUMS", "SQ_TAIL", "SQ_HEAD", "CQ_HEAD",
    "DAEMON_IDLE", "CLIENT_WAITS", "CLOSED",
]

MAGIC = 0x474E5258  # "XRNG" little-endian
VERSION = 1
PAGE = 4096
MAX_EXT = 32  # inline array slots after an entry at most
MESSAGE_BYTES = 512  # a CQE's message slot

# The header page: the geometry, then one 64-byte line per shared word. These
# are the words' indices in the page seen as uint64s (line n at byte 64 * n).
SQ_TAIL = 8 * 1       # client: entries written (positions, not wrapped)
SQ_HEAD = 8 * 2       # daemon: entries taken
CQ_HEAD = 8 * 3       # client: completions read
DAEMON_IDLE = 8 * 4   # daemon: 1 while it may sleep: ring the SQ doorbell
CLIENT_WAITS = 8 * 5  # client: 1 while it sleeps on the CQ doorbell
CLOSED = 8 * 6        # daemon: nonzero once it stopped serving these rings

GEOMETRY = struct.Struct("<4I6Q")


class Geometry(NamedTuple):
    """struct Geometry: sizes and offsets of the areas."""

    magic: int
    version: int
    sq_entries: int
    cq_entries: int
    sq_offset: int
    cq_offset: int
    messages_offset: int
    buffer_offset: int
    buffer_bytes: int
    total_bytes: int


OP_WRITE, OP_READ = 1, 2
FORM_RANGE, FORM_LIST, FORM_STRIDED, FORM_LAYOUT = 0, 1, 2, 3
FLAG_QUEUED_NOTICE, FLAG_DETACHED, FLAG_VERIFY, FLAG_NO_VERIFY = 1, 2, 4, 8

# struct Sqe (64 bytes): opcode, form, ext, flags, slice_kib, priority,
# reserved0, peer, src, dst, label, user_data, a, b, c, timeout_ms, expected
# (a read's expected checksums, packed after the arrays).
SQE = struct.Struct("<BBBBHBBIIIIQQQQII")

STATE_QUEUED, STATE_DONE, STATE_FAILED, STATE_CANCELLED = 1, 3, 4, 5
CQE_MORE = 1  # a queued notice: the final completion follows
CQE_VERIFIED = 2  # its blocks were verified end to end
CQE_CHECKSUMS = 4  # the message slot holds its checksums (message_bytes / 8 uint64)

# struct Cqe (64 bytes): seq, user_data, transfer_id, bytes_done, length,
# duration_ns, blocks, slices, code, state, flags, message_bytes.
CQE = struct.Struct("<6QIIIBBH")


assert SQE.size == 64 and CQE.size == 64 and GEOMETRY.size == 64
