"""A local client's request rings: writes and reads with no gRPC call.

The daemon's local socket (`xferd.local_socket`) hands a client a memfd
holding a submission ring (SQ) and a completion ring (CQ) (layout:
`xferd.ring_layout`, after daemon/base/ring_layout.h) and two eventfd
doorbells. `LocalRings` opens them, interns names, puts entries and
reaps completions; `xferd.Client` waits for them on its callers' threads,
`xferd.aio.Client` on its event loop (`xferd.aio.rings`). This mirrors the
C++ client's client/cpp/local_rings.cc.

Memory ordering, with no fences in Python. The shared words (indices and
flags) are aligned uint64s stored and loaded through a memoryview cast to
"Q": CPython copies each with a fixed 8-byte memcpy, which compilers emit
as one 8-byte move (not a language guarantee, but what GCC and Clang do on
x86-64), atomic when aligned; each is its own C call, so nothing is
reordered across them before the hardware sees them. On x86-64 (TSO) the
hardware keeps stores in program order and loads in program order: an entry
written before its tail is stored is seen before the tail (release), a
CQE's fields read after its seq are as new (acquire). The one reordering
TSO allows is a load passing an earlier store, which the Dekker handshake
of the doorbells must forbid (a side stores its flag, then loads the other
side's). `full_fence()` does that with an uncontended lock acquire and
release, a locked read-modify-write on x86-64 (glibc semaphores; PyMutex on
3.13), which orders every earlier store before every later load. Should it
ever not, the cost is bounded: a waiter never sleeps on the doorbell longer
than _DOORBELL_POLL_S before it looks at the ring again, so a lost wakeup
delays, never hangs. A weakly ordered CPU (aarch64) would need real
release/acquire barriers, which Python cannot issue: there `ORDERED_CPU`
is false and the clients use gRPC.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import platform
import select
import threading
import time
from typing import Dict, Iterable, List, Optional

import grpc

from xferd import ring_layout as L
from xferd.errors import error_for
from xferd.local_socket import LocalSocket, unavailable
from xferd.v1 import local_pb2

__all__ = ["LocalRings", "ORDERED_CPU", "RingCompletion", "RingRequest", "full_fence"]

#: The CPU orders plain stores and loads as the rings need (see above).
ORDERED_CPU = platform.machine().lower() in ("x86_64", "amd64")

# The longest a waiter sleeps on the CQ doorbell before it looks again.
_DOORBELL_POLL_S = 0.1
_ONE = (1).to_bytes(8, "little")
_FENCE = threading.Lock()


def full_fence() -> None:
    """Orders earlier stores before later loads (see the module docstring)."""
    _FENCE.acquire()
    _FENCE.release()


@dataclasses.dataclass
class RingRequest:
    """One request as a submission entry says it, with names for handles and
    its arrays packed little-endian in the entry's form."""

    opcode: int = L.OP_WRITE
    form: int = L.FORM_RANGE
    peer: str = ""
    src: str = ""  # region (layout for the layout form)
    dst: str = ""
    label: str = ""
    a: int = 0  # range: src_offset; else count
    b: int = 0  # range: dst_offset; list: block_length
    length: int = 0  # range only
    arrays: bytes = b""
    slice_kib: int = 0
    timeout_ms: int = 0
    queued_notice: bool = False
    detached: bool = False  # runs on if this client's session closes first
    priority: int = 0  # the Priority number; 0: the daemon's default (normal)
    verify: Optional[bool] = None  # None: the daemon's engine.verify
    expected: int = 0  # a read's expected checksums, packed after the arrays


@dataclasses.dataclass(slots=True)
class RingCompletion:
    """What a completion says."""

    user_data: int
    transfer_id: int  # 0: refused before a transfer started
    state: int
    queued: bool  # a queued notice: the final completion follows
    bytes_done: int
    length: int
    blocks: int
    slices: int
    duration_ns: int
    code: int  # 0: OK
    message: str
    verified: bool = False  # its blocks were verified end to end
    checksums: bytes = b""  # a verified transfer's, once done, if they fit the slot


@dataclasses.dataclass
class _Waiter:
    queued: Optional[RingCompletion] = None
    final: Optional[RingCompletion] = None
    abandoned: bool = False  # nobody waits for it: drop its completions


class LocalRings:
    """One session's rings. Thread-safe: any thread may submit and wait; one
    waiter at a time reaps for all (spinning briefly, then sleeping on the
    doorbell), as the C++ client does."""

    def __init__(self, local_socket: str, sq_entries: int = 256, cq_entries: int = 0,
                 buffer_bytes: int = 16 << 20, client_name: str = "python",
                 spin: float = 50e-6) -> None:
        """Connects to `local_socket` and opens the rings.

        Raises:
            Unavailable: no local socket there (the daemon serves none).
            XferdError: the daemon's refusal (InvalidArgument sizes,
                ResourceExhausted sessions), or a ring version this client
                does not speak (FailedPrecondition).
        """
        self._spin = spin
        self._sock = LocalSocket(local_socket)
        self._fds: List[int] = []
        self._map: Optional[mmap.mmap] = None
        try:
            request = local_pb2.LocalRequest()
            request.open_rings.sq_entries = sq_entries
            request.open_rings.cq_entries = cq_entries
            request.open_rings.buffer_bytes = buffer_bytes
            request.open_rings.client = client_name
            reply, self._fds = self._sock.exchange(request)
            if len(self._fds) != 3:
                raise error_for(grpc.StatusCode.INTERNAL, "the daemon sent no ring descriptors")
            self._map = mmap.mmap(self._fds[0], reply.rings.total_bytes, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
            g = L.Geometry(*L.GEOMETRY.unpack_from(self._map, 0))
            if (g.magic != L.MAGIC or g.version != L.VERSION
                    or g.total_bytes != reply.rings.total_bytes):
                raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                                f"the daemon's rings are version {g.version}; this client "
                                f"speaks {L.VERSION}")
        except BaseException:
            self._release()
            raise
        self.geometry = g
        self._submit_fd, self._complete_fd = self._fds[1], self._fds[2]
        view = memoryview(self._map)
        self._words = view[:L.PAGE].cast("Q")
        cq_bytes = g.cq_entries * L.CQE.size
        self._cq_words = view[g.cq_offset:g.cq_offset + cq_bytes].cast("Q")
        self._cq_mask = g.cq_entries - 1
        self._view = view
        self._names: Dict[str, int] = {}
        self._submit_lock = threading.Lock()  # the SQ tail and the buffer area
        self._sq_tail = 0
        self._next_user_data = 1
        # Waiters, in_flight and the reaper role; never taken twice by a thread.
        self._cv = threading.Condition(threading.Lock())
        self._waiters: Dict[int, _Waiter] = {}
        self._reaping = False
        self._in_flight = 0
        self._cq_head = 0  # the reaper's

    # ------------------------------------------------------------ session --

    def handles(self, names: Iterable[str]) -> List[int]:
        """The handles of `names` ("" is 0), interning the new ones."""
        names = list(names)
        try:  # all known: the common case, with no call
            return [self._names[n] if n else 0 for n in names]
        except KeyError:
            pass
        new = [n for n in dict.fromkeys(names) if n and n not in self._names]
        if new:
            request = local_pb2.LocalRequest()
            request.intern.names.extend(new)
            reply, fds = self._sock.exchange(request)
            for fd in fds:
                os.close(fd)
            self._names.update(zip(new, reply.interned.handles))
        return [self._names[n] if n else 0 for n in names]

    def closed(self) -> bool:
        """The daemon stopped serving these rings."""
        return self._words[L.CLOSED] != 0

    def _check_open(self) -> None:
        if self.closed():
            raise unavailable("the daemon closed this session's rings")

    @property
    def submitted(self) -> int:
        """Entries submitted so far."""
        return self._next_user_data - 1

    @property
    def capacity(self) -> int:
        """Requests that may be in flight: half the CQ (each may take two)."""
        return min(self.geometry.sq_entries, self.geometry.cq_entries // 2)

    @property
    def complete_fd(self) -> int:
        """The CQ doorbell (an eventfd, non-blocking)."""
        return self._complete_fd

    def close(self) -> None:
        """Ends the session: the daemon ends its transfers not detached."""
        for v in (self._words, self._cq_words, self._view):
            v.release()
        self._release()

    def _release(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        self._sock.close()

    # --------------------------------------------------------- submitting --

    def reserve(self) -> bool:
        """Counts one more request in flight if the CQ has room for it."""
        with self._cv:
            if self._in_flight >= self.capacity:
                return False
            self._in_flight += 1
            return True

    def unreserve(self) -> None:
        """Undoes reserve() for a request that was not submitted."""
        with self._cv:
            self._in_flight -= 1

    def try_put(self, r: RingRequest, handles: List[int]) -> Optional[int]:
        """Puts `r`'s entry (and arrays) if the SQ has room now; its
        user_data, or None to try again. Arrays too large for the inline
        slots go to the buffer area, once the daemon has taken every entry
        before (it copies the arrays as it takes an entry)."""
        g = self.geometry
        size = len(r.arrays)
        inline = size <= L.MAX_EXT * L.SQE.size and size // L.SQE.size + 1 < g.sq_entries
        ext = (size + L.SQE.size - 1) // L.SQE.size if inline else 0
        with self._submit_lock:
            self._check_open()
            tail = self._sq_tail
            if tail + 1 + ext - self._words[L.SQ_HEAD] > g.sq_entries:
                return None
            if r.form != L.FORM_RANGE and not inline:
                if size > g.buffer_bytes:
                    raise error_for(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"the request's arrays are {size} bytes, more than the ring's buffer "
                        f"area of {g.buffer_bytes}: open the rings with a larger buffer, or "
                        "use gRPC")
                if self._words[L.SQ_HEAD] != tail:
                    return None
                # One memcpy: the arrays were packed (vectorised) by xferd.blocks.
                self._view[g.buffer_offset:g.buffer_offset + size] = r.arrays
            user_data = self._next_user_data
            self._next_user_data += 1
            flags = ((L.FLAG_QUEUED_NOTICE if r.queued_notice else 0)
                     | (L.FLAG_DETACHED if r.detached else 0)
                     | (0 if r.verify is None else
                        L.FLAG_VERIFY if r.verify else L.FLAG_NO_VERIFY))
            c = r.length if r.form == L.FORM_RANGE else 0
            mask = g.sq_entries - 1
            L.SQE.pack_into(self._view, g.sq_offset + (tail & mask) * L.SQE.size, r.opcode,
                            r.form, ext, flags, r.slice_kib, r.priority, 0, *handles, user_data,
                            r.a, r.b, c, r.timeout_ms, r.expected)
            for i in range(ext):  # at most MAX_EXT slots, whatever the block count
                chunk = r.arrays[i * L.SQE.size:(i + 1) * L.SQE.size]
                at = g.sq_offset + ((tail + 1 + i) & mask) * L.SQE.size
                self._view[at:at + len(chunk)] = chunk
            self._sq_tail = tail + 1 + ext
            self._words[L.SQ_TAIL] = self._sq_tail  # after the entry: TSO keeps the order
            full_fence()  # the tail before the daemon's flag (it: the flag, then the tail)
            if self._words[L.DAEMON_IDLE] != 0:
                self._ring_daemon()
            return user_data

    def _ring_daemon(self) -> None:
        try:
            os.write(self._submit_fd, _ONE)
        except BlockingIOError:  # the counter is full: the daemon is woken anyway
            pass

    # ------------------------------------------------------------ reaping --

    def _ready(self) -> bool:
        """The CQE at the head is complete (its seq, written last, is its
        position + 1)."""
        head = self._cq_head
        return bool(self._cq_words[(head & self._cq_mask) * 8] == head + 1)

    def _decode(self, position: int) -> RingCompletion:
        g = self.geometry
        slot = position & self._cq_mask
        (_, user_data, transfer_id, bytes_done, length, duration_ns, blocks, slices, code, state,
         flags, message_bytes) = L.CQE.unpack_from(self._view, g.cq_offset + slot * L.CQE.size)
        message, checksums = "", b""
        if code != 0 or flags & L.CQE_CHECKSUMS:
            at = g.messages_offset + slot * L.MESSAGE_BYTES
            n = min(message_bytes, L.MESSAGE_BYTES)
            if flags & L.CQE_CHECKSUMS:
                checksums = bytes(self._view[at:at + n])
            else:
                message = bytes(self._view[at:at + n]).decode("utf-8", errors="replace")
        return RingCompletion(user_data, transfer_id, state, bool(flags & L.CQE_MORE), bytes_done,
                              length, blocks, slices, duration_ns, code, message,
                              bool(flags & L.CQE_VERIFIED), checksums)

    def reap_ready(self, limit: int = 64) -> List[RingCompletion]:
        """The completions that have arrived (one reaper at a time), their
        slots freed; wakes the daemon if it sleeps on a full CQ."""
        out: List[RingCompletion] = []
        while len(out) < limit and self._ready():
            out.append(self._decode(self._cq_head))
            self._cq_head += 1
        if out:
            self._words[L.CQ_HEAD] = self._cq_head
            full_fence()
            if self._words[L.DAEMON_IDLE] != 0:
                self._ring_daemon()
        return out

    def set_client_waits(self, waits: bool) -> None:
        """Says whether the daemon must ring the CQ doorbell."""
        self._words[L.CLIENT_WAITS] = 1 if waits else 0

    def drain_doorbell(self) -> None:
        """Reads the CQ doorbell's count, if any."""
        try:
            os.read(self._complete_fd, 8)
        except BlockingIOError:
            pass

    def _reap_blocking(self, deadline: Optional[float]) -> List[RingCompletion]:
        """Spins on the CQ up to the spin time, then sleeps on the doorbell
        (its flag first, then one more look) until something arrives or
        `deadline` (time.monotonic()) passes."""
        spin_until = time.monotonic() + self._spin
        while not self._ready():
            if self.closed():
                return []
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return []
            if now < spin_until:
                os.sched_yield()  # the daemon's poller may be waiting for this core
                continue
            self.set_client_waits(True)
            full_fence()  # the flag before the look (the daemon: the CQE, then the flag)
            if not self._ready():
                wait = _DOORBELL_POLL_S if deadline is None else min(_DOORBELL_POLL_S,
                                                                    max(deadline - now, 0.001))
                poller = _poller(self._complete_fd)
                poller.poll(wait * 1000)
                self.drain_doorbell()
            self.set_client_waits(False)
        return self.reap_ready()

    def submit(self, r: RingRequest) -> int:
        """Submits `r` (blocking while the rings are full); its user_data."""
        handles = self.handles([r.peer, r.src, r.dst, r.label])
        while not self.reserve():
            self._check_open()
            self._reap_once(time.monotonic() + 0.1)
        try:
            while True:
                user_data = self.try_put(r, handles)
                if user_data is not None:
                    return user_data
                os.sched_yield()
        except BaseException:
            self.unreserve()
            raise

    def _reap_once(self, deadline: float) -> None:
        """Reaps as the one reaper, or waits a little for the one there is."""
        with self._cv:
            if not self._become_reaper():
                return
        self._reap_as_reaper(deadline)

    def _become_reaper(self) -> bool:
        """Takes the reaper's role if free (self._cv held); else waits a
        little for the reaper there is and says no."""
        if self._reaping:
            self._cv.wait(0.01)
            return False
        self._reaping = True
        return True

    def _reap_as_reaper(self, deadline: float) -> None:
        """Reaps, files what came and gives the role back."""
        got: List[RingCompletion] = []
        try:
            got = self._reap_blocking(deadline)
        finally:
            with self._cv:
                self._reaping = False
                self._file(got)
                self._cv.notify_all()

    def _file(self, got: List[RingCompletion]) -> None:
        """Files each completion with its waiter (self._cv held)."""
        for c in got:
            if not c.queued:
                self._in_flight -= 1
            w = self._waiters.get(c.user_data)
            if w is None:
                w = self._waiters[c.user_data] = _Waiter()
            elif w.abandoned:
                if not c.queued:
                    del self._waiters[c.user_data]
                continue
            if c.queued:
                w.queued = c
            else:
                w.final = c

    def wait(self, user_data: int, until_queued: bool,
             deadline: Optional[float]) -> RingCompletion:
        """The final completion of `user_data` (or its queued notice first,
        with `until_queued`), by `deadline` (time.monotonic(); None: none).

        Raises:
            DeadlineExceeded: none by then (its completions are dropped).
            Unavailable: the daemon closed the rings.
        """
        bound = deadline if deadline is not None else time.monotonic() + 3600
        while True:
            with self._cv:
                w = self._waiters.get(user_data)
                if w is not None:
                    if until_queued and w.queued is not None:
                        return w.queued
                    if w.final is not None:
                        del self._waiters[user_data]
                        return w.final
                if deadline is not None and time.monotonic() >= deadline:
                    self._waiters.setdefault(user_data, _Waiter()).abandoned = True
                    raise error_for(grpc.StatusCode.DEADLINE_EXCEEDED,
                                    "no completion from the daemon before the deadline")
                self._check_open()
                if not self._become_reaper():
                    continue
            self._reap_as_reaper(bound)

    def forget(self, user_data: int) -> None:
        """Nobody will wait for `user_data`'s final completion."""
        with self._cv:
            w = self._waiters.setdefault(user_data, _Waiter())
            if w.final is not None:
                del self._waiters[user_data]
            else:
                w.abandoned = True

    def settle(self, got: List[RingCompletion]) -> None:
        """Counts the final completions among `got` out of flight (for a
        caller that reaps itself, as xferd.aio does)."""
        with self._cv:
            self._in_flight -= sum(1 for c in got if not c.queued)


def _poller(fd: int) -> "select.poll":
    p = select.poll()
    p.register(fd, select.POLLIN)
    return p
