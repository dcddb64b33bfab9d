"""The daemon's local socket: what a client on its host asks beside gRPC.

A SOCK_SEQPACKET unix socket next to the daemon's gRPC one
("<unix socket>.local", proto/xferd/v1/local.proto, docs/local-socket.md):
each request is one packet, each reply one packet with the descriptors it
hands over attached (SCM_RIGHTS), which gRPC cannot carry. The request rings
(`xferd.rings`) and SHM regions' memory (`xferd.shm`) come this way. This
mirrors the C++ client's client/cpp/local_socket.cc.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import List, NamedTuple, Optional, Tuple

import grpc

from xferd.errors import XferdError, error_for
from xferd.v1 import local_pb2

__all__ = ["LocalSocket", "OpenedRegion", "local_socket_for", "open_region", "unavailable"]

# The largest reply packet: replies hold names and sizes only.
_MAX_PACKET = 64 << 10
# The most descriptors one reply hands over (the rings': three).
_MAX_FDS = 4


def unavailable(message: str) -> XferdError:
    """An Unavailable error with `message`."""
    return error_for(grpc.StatusCode.UNAVAILABLE, message)


def local_socket_for(target: str) -> Optional[str]:
    """The local socket beside gRPC target `target`'s unix socket
    ("unix:/run/xferd/xferd.sock" -> "/run/xferd/xferd.sock.local"), wherever
    it is mounted; None for a target that is not a unix socket."""
    if not target.startswith("unix:"):
        return None
    path = target[len("unix:"):]
    if path.startswith("//"):
        path = path[2:]
    return path + ".local"


class LocalSocket:
    """One connection to a daemon's local socket. Thread-safe: one exchange
    at a time."""

    def __init__(self, path: str) -> None:
        """Connects to `path`.

        Raises:
            Unavailable: nothing listens there (no daemon, or none with a
                local socket).
        """
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._lock = threading.Lock()
        try:
            self._sock.connect(path)
        except OSError as e:
            self._sock.close()
            raise unavailable(f"connecting to the daemon's local socket {path}: "
                              f"{e.strerror}") from None

    def exchange(self, request: local_pb2.LocalRequest
                 ) -> Tuple[local_pb2.LocalReply, List[int]]:
        """Sends `request` and returns its reply with the descriptors it
        hands over (the caller's to close).

        Raises:
            Unavailable: the socket failed or the daemon closed it.
            XferdError: the daemon's refusal (its code and message); no
                descriptor is left open then.
        """
        with self._lock:
            try:
                self._sock.send(request.SerializeToString())
                data, fds, _, _ = socket.recv_fds(self._sock, _MAX_PACKET, _MAX_FDS)
            except OSError as e:
                raise unavailable(f"the daemon's local socket: {e}") from None
        if not data:
            _close_all(fds)
            raise unavailable("the daemon closed the local socket")
        reply = local_pb2.LocalReply.FromString(data)
        if reply.HasField("error"):
            _close_all(fds)
            raise error_for(reply.error.code, reply.error.message)
        return reply, list(fds)

    def close(self) -> None:
        """Closes the connection (the daemon ends this session). Idempotent."""
        self._sock.close()


class OpenedRegion(NamedTuple):
    """An SHM region's memory as the local socket hands it over."""

    fd: int  # the sealed memfd: the caller's to map and close
    size: int
    node_id: str  # the daemon that answered (its NodeInfo's node_id and pid)
    pid: int


def open_region(path: str, region: str) -> OpenedRegion:
    """Asks the daemon at local socket `path` for SHM region `region`'s
    memory.

    Raises:
        Unavailable: no local socket there.
        NotFound, FailedPrecondition: no such region, or not an SHM region.
    """
    conn = LocalSocket(path)
    try:
        request = local_pb2.LocalRequest()
        request.open_region.region = region
        reply, fds = conn.exchange(request)
    finally:
        conn.close()  # the descriptor outlives the connection
    if len(fds) != 1:
        _close_all(fds)
        raise error_for(grpc.StatusCode.INTERNAL,
                        f"the daemon sent no memory for region '{region}'")
    return OpenedRegion(fds[0], reply.region.size, reply.region.node_id, reply.region.pid)


def _close_all(fds: List[int]) -> None:
    for fd in fds:
        os.close(fd)
