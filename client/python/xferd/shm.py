"""Lazy MAP_SHARED mappings of SHM regions.

The daemon backs an SHM region with a file under /dev/shm; a local client
maps the same file and reads or fills the region in place, with no copies.
"""

from __future__ import annotations

import mmap
import os
import threading
import weakref
from typing import Any, Optional

from xferd.v1 import common_pb2

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

    def __init__(self, region: str, path: str, size: int) -> None:
        """Remembers the file `path` of `region`, `size` bytes; maps nothing yet."""
        self.region = region
        self.path = path
        self.size = size
        self._lock = threading.Lock()
        self._mmap: Optional[mmap.mmap] = None
        self._view: Optional[memoryview] = None
        self._closed = False

    def view(self) -> memoryview:
        """The region's bytes as a writable memoryview, mapping them if needed.

        Raises:
            ValueError: the mapping was closed (the region was deregistered or
                the client closed).
            OSError: the file cannot be opened or mapped.
        """
        with self._lock:
            if self._closed:
                raise ValueError(self.closed_message())
            if self._view is None:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
                try:
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
        """True while the file is mapped."""
        with self._lock:
            return self._view is not None

    def close(self) -> None:
        """Releases the view and unmaps the file. Idempotent."""
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

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mappings: "weakref.WeakSet[ShmMapping]" = weakref.WeakSet()

    def open(self, region: Any) -> Optional[ShmMapping]:
        """The (lazy) mapping of an xferd.v1.Region message if it is an SHM
        region with a path, else None."""
        if region.backing != common_pb2.REGION_BACKING_SHM or not region.shm_path:
            return None
        mapping = ShmMapping(region.name, region.shm_path, region.size)
        with self._lock:
            self._mappings.add(mapping)
        return mapping

    def close(self, region: Optional[str] = None) -> None:
        """Closes the mappings of `region` (None: all of them)."""
        with self._lock:
            closing = [m for m in self._mappings if region is None or m.region == region]
        for mapping in closing:
            mapping.close()
