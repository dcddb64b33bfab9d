"""Python client of the xferd data-transfer daemon.

    import xferd

    with xferd.Client("unix:/run/xferd/xferd.sock") as c:
        src = c.register_region("src", 1 << 20, backing="shm")
        src.buffer[:5] = b"hello"
        c.connect_peer("10.0.0.2:7300")
        c.write("src", "node-b", "dst", length=1 << 20).wait()

Many blocks in one transfer: write_blocks()/read_blocks() take numpy arrays
(or other buffers) of offsets, write_strided()/read_strided() take
`Strided` runs, and write_indexed()/read_indexed() name blocks of layouts
registered once with prepare_layout().

Errors are `XferdError` subclasses named after gRPC status codes; snapshots
(Region, Peer, Transfer, ...) are frozen dataclasses whose `transport` field
says "tcp" or "verbs". The package is typed (py.typed); enumerations are
`Literal` strings (Transport, TransferState, ...).
"""

from xferd.blocks import Strided
from xferd.client import DEFAULT_RPC_TIMEOUT, Client
from xferd.errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                          FailedPrecondition, Internal, InvalidArgument, NotFound, OutOfRange,
                          PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable,
                          Unimplemented, Unknown, XferdError)
from xferd.handles import RegionWatch, TransferHandle
from xferd.tls import TlsConfig
from xferd.models import (TERMINAL_STATES, Backing, ClusterNode, DeviceStats, Direction,
                          DirectoryRegion, EventKind, Layout, NodeInfo, NodeState, Peer, PeerState,
                          Priority, PriorityStats, RdmaDevice, RdmaGid, RdmaPort, Region,
                          RegionEvent, Stats, Status, TenantStats, Transfer, TransferState,
                          Transport, Unset, WriteSpec)

__all__ = [
    "DEFAULT_RPC_TIMEOUT",
    "TERMINAL_STATES",
    "Aborted",
    "AlreadyExists",
    "Backing",
    "Cancelled",
    "Client",
    "ClusterNode",
    "DataLoss",
    "DeadlineExceeded",
    "DeviceStats",
    "Direction",
    "DirectoryRegion",
    "EventKind",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "Layout",
    "NodeInfo",
    "NodeState",
    "RdmaDevice",
    "RdmaGid",
    "RdmaPort",
    "NotFound",
    "OutOfRange",
    "Priority",
    "PriorityStats",
    "Peer",
    "PeerState",
    "PermissionDenied",
    "Region",
    "RegionEvent",
    "RegionWatch",
    "ResourceExhausted",
    "Stats",
    "Status",
    "Strided",
    "TenantStats",
    "TlsConfig",
    "Transfer",
    "TransferHandle",
    "TransferState",
    "Transport",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "Unset",
    "WriteSpec",
    "XferdError",
]
