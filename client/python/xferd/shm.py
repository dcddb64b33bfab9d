"""Lazy MAP_SHARED mappings of SHM regions.

The daemon backs an SHM region with a file under /dev/shm; a local client
maps the same file and reads or fills the region in place, with no copies.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import Optional

__all__ = ["ShmMapping"]


class ShmMapping:
    """The mapping of one SHM region, made on first use, closed explicitly.

    Thread-safe. `view()` always returns the same memoryview until `close()`,
    which releases it (later use of that view raises ValueError) and unmaps
    the file. Views derived from it (slices, numpy arrays) keep the memory
    mapped until they are released themselves.
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
                raise ValueError(f"the mapping of {self.path} is closed")
            if self._view is None:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    self._mmap = mmap.mmap(fd, self.size, mmap.MAP_SHARED,
                                           mmap.PROT_READ | mmap.PROT_WRITE)
                finally:
                    os.close(fd)  # the mapping keeps the memory alive
                self._view = memoryview(self._mmap)
            return self._view

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
            # Views derived from ours are still alive; the memory is unmapped
            # when the last of them is garbage-collected.
            pass
