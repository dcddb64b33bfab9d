"""Lazy MAP_SHARED mappings of SHM regions.

The daemon backs an SHM region with a memfd sealed so that nobody can shrink
or grow it, and hands it to local clients over its local socket
(`xferd.local_socket`, OpenRegionRequest); a client maps it and reads or
fills the region in place, with no copies. Only a client on the daemon's
host can: over its unix socket, or over TCP when the local socket its
NodeInfo names is on this host and answers as the same daemon.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import Any, Callable, Optional, Tuple

import grpc

from xferd.errors import error_for
from xferd.local_socket import open_region
from xferd.v1 import common_pb2, xferd_pb2

__all__ = ["Mappings", "ShmMapping"]


class ShmMapping:
    """The mapping of one SHM region, made on first use, closed explicitly.

    Thread-safe. `view()` always returns the same memoryview until `close()`,
    which releases it (later use of that view raises ValueError) and unmaps
    the file. Arrays and tensors of `xferd.arrays` check `closed` on every
    access and raise once it is set; while any of them (or a slice of the
    memoryview) is still alive, the memory stays mapped, so nothing that
    escapes the checks can touch unmapped memory: it reads stale bytes of a
    region that is gone, never crashes.
    """

    def __init__(self, region: str, size: int, opener: Callable[[], Tuple[int, int]]) -> None:
        """Remembers `region`, `size` bytes, and `opener`, which returns a
        descriptor of its memory (the caller's to close) and its size; maps
        nothing yet."""
        self.region = region
        self.size = size
        self._opener = opener
        self._lock = threading.Lock()
        self._mmap: Optional[mmap.mmap] = None
        self._view: Optional[memoryview] = None
        self._closed = False

    def view(self) -> memoryview:
        """The region's bytes as a writable memoryview, mapping them if needed.

        Raises:
            ValueError: the mapping was closed (the region was deregistered or
                the client closed).
            XferdError: the daemon refused the region's memory (NotFound: it
                was deregistered; Unavailable: no local socket).
            OSError: the memory cannot be mapped.
        """
        with self._lock:
            if self._closed:
                raise ValueError(self.closed_message())
            if self._view is None:
                fd, size = self._opener()
                try:
                    if size != self.size:  # deregistered and registered anew
                        raise ValueError(f"region '{self.region}' is now {size} bytes, not "
                                         f"{self.size}: it was registered again; take its "
                                         "new Region")
                    self._mmap = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                                           mmap.PROT_READ | mmap.PROT_WRITE)
                finally:
                    os.close(fd)  # the mapping keeps the memory alive
                self._view = memoryview(self._mmap)
            return self._view

    def mmap(self) -> mmap.mmap:
        """The mapping itself (mapping it if needed), for array views.

        Raises:
            ValueError, OSError: as view().
        """
        self.view()
        with self._lock:
            if self._mmap is None:
                raise ValueError(self.closed_message())
            return self._mmap

    @property
    def closed(self) -> bool:
        """True once close() ran: the region's views must not be used."""
        return self._closed

    def closed_message(self) -> str:
        """Why a view of this region cannot be used any more."""
        return (f"region '{self.region}' was deregistered or its client closed: its views "
                "are no longer usable (register it again and take new views)")

    def check(self) -> None:
        """Raises ValueError (closed_message()) once the mapping is closed."""
        if self._closed:
            raise ValueError(self.closed_message())

    @property
    def mapped(self) -> bool:
        """True while the memory is mapped."""
        with self._lock:
            return self._view is not None

    def close(self) -> None:
        """Releases the view and unmaps the memory. Idempotent."""
        with self._lock:
            self._closed = True
            view, self._view = self._view, None
            mapping, self._mmap = self._mmap, None
        try:
            if view is not None:
                view.release()
            if mapping is not None:
                mapping.close()
        except BufferError:
            # Views derived from ours (slices, arrays) are still alive; the
            # memory is unmapped when the last of them is garbage-collected,
            # and until then array views raise on access (`closed`).
            pass


class Mappings:
    """The SHM mappings a client made, to close by region or all at once.

    Thread-safe; shared by `xferd.Client` and `xferd.aio.Client`. Holds them
    weakly: a mapping no Region refers to any more goes with its last view.
    """

    def __init__(self, target: str, local_socket: Optional[str],
                 node_info: Callable[[], xferd_pb2.NodeInfo]) -> None:
        """Mappings of the daemon at gRPC `target`, whose `local_socket`
        hands over SHM regions' memory (None for a TCP target: then the one
        `node_info()` names, if it is on this host)."""
        self._target = target
        self._local_socket = local_socket
        self._node_info = node_info
        self._lock = threading.Lock()
        self._mappings: "weakref.WeakSet[ShmMapping]" = weakref.WeakSet()

    def open(self, region: Any) -> Optional[ShmMapping]:
        """The (lazy) mapping of an xferd.v1.Region message if it is an SHM
        region, else None. Opening it (on first use) is one exchange on the
        local socket, on the calling thread."""
        if region.backing != common_pb2.REGION_BACKING_SHM:
            return None
        name = region.name
        mapping = ShmMapping(name, region.size, lambda: self._open_memory(name))
        with self._lock:
            self._mappings.add(mapping)
        return mapping

    def _open_memory(self, region: str) -> Tuple[int, int]:
        if self._local_socket is not None:
            opened = open_region(self._local_socket, region)
            return opened.fd, opened.size
        # Over TCP: the daemon's local socket, if this is its host.
        info = self._node_info()
        if not info.local_socket or not os.path.exists(info.local_socket):
            raise ValueError(f"region '{region}': only a client on the daemon's host can map an "
                             f"shm region; {self._target} serves no local socket here")
        opened = open_region(info.local_socket, region)
        if (opened.node_id, opened.pid) != (info.node_id, info.pid):
            os.close(opened.fd)
            raise error_for(grpc.StatusCode.FAILED_PRECONDITION,
                            f"region '{region}': the local socket {info.local_socket} belongs to "
                            f"daemon '{opened.node_id}' (pid {opened.pid}), not to "
                            f"'{info.node_id}' (pid {info.pid}) at {self._target}")
        return opened.fd, opened.size

    def close(self, region: Optional[str] = None) -> None:
        """Closes the mappings of `region` (None: all of them)."""
        with self._lock:
            closing = [m for m in self._mappings if region is None or m.region == region]
        for mapping in closing:
            mapping.close()
