"""Helpers shared by the integration tests: reproducible data, checksums,
and bounded waits on daemon state."""

from __future__ import annotations

import hashlib
import os
import random
import time
from typing import TYPE_CHECKING, Callable, Optional, TypeVar

import pytest

import xferd

if TYPE_CHECKING:
    import numpy as np

    from daemons import Daemon

T = TypeVar("T")

#: Stress tests exercise transport-independent logic (engine, service) at
#: volume; the Soft-RoCE suite skips them (XFERD_SKIP_STRESS=1) because the
#: TCP run already covers them and the emulated VM is slow.
stress = pytest.mark.skipif(os.environ.get("XFERD_SKIP_STRESS") == "1",
                            reason="stress test of transport-independent logic: runs over TCP")

#: Upper bound on any single wait in these tests; generous for a loaded CI
#: machine, short enough that a hang fails with a message instead.
WAIT_S = 30.0


def pattern(seed: int, size: int) -> bytes:
    """`size` reproducible pseudo-random bytes; distinct seeds give distinct data."""
    return random.Random(seed).randbytes(size)


def sha(data: "bytes | memoryview") -> str:
    """The sha256 of `data` (memoryviews are hashed in place, without copy)."""
    return hashlib.sha256(data).hexdigest()


def fill(region: xferd.Region, seed: int, offset: int = 0,
         length: Optional[int] = None) -> bytes:
    """Writes pattern(seed) into an SHM region's buffer; returns the bytes."""
    length = region.size - offset if length is None else length
    data = pattern(seed, length)
    region.buffer[offset:offset + length] = data
    return data


def as_array(region: xferd.Region) -> "np.ndarray":
    """An SHM region's buffer as a numpy uint8 array (no copy)."""
    import numpy as np
    return np.frombuffer(region.buffer, dtype=np.uint8)


def fill_random(region: xferd.Region, seed: int) -> "np.ndarray":
    """Random bytes (numpy's generator, `seed`) into the whole of an SHM
    region's buffer; returns a copy of them."""
    import numpy as np
    data = np.random.default_rng(seed).integers(0, 256, region.size, dtype=np.uint8)
    as_array(region)[:] = data
    return data


def wait_until(what: str, probe: Callable[[], Optional[T]], timeout: float = WAIT_S,
               period: float = 0.02) -> T:
    """Polls `probe` until it returns a truthy value, for state the daemon
    exposes only by polling (peer state); fails with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(period)


def peer(client: xferd.Client, node_id: str) -> Optional[xferd.Peer]:
    """The client's daemon's view of peer `node_id`, or None."""
    return next((p for p in client.peers() if p.node_id == node_id), None)


def start_stalled(stalled: "Daemon", client: xferd.Client,
                  submit: Callable[[], xferd.TransferHandle]) -> xferd.TransferHandle:
    """Freezes the peer `stalled` (SIGSTOP), submits a transfer to it through
    `client` with `submit`, and returns once the transfer is RUNNING: ops are
    on the wire and, over TCP, it cannot finish until the peer runs again
    (over verbs the peer's NIC keeps answering: size transfers for
    ~50 MB/s). The peer is left frozen. Resolve the peer's region first
    (a one-byte transfer), while the peer still answers."""
    stalled.pause()
    handle = submit()
    for snapshot in handle.progress(interval=0.01, timeout=WAIT_S):
        assert not snapshot.terminal, f"transfer ended with {stalled.name} frozen: {snapshot}"
        if snapshot.state == "running":
            break
    return handle
