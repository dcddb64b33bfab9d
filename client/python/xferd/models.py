"""Immutable snapshots of what a daemon reports: regions, peers, transfers,
region events, node information and statistics.

Enumerations become lower-case strings ("tcp", "verbs", "done", "landed", ...)
so they read well in logs and compare simply, typed as `Literal`s (Transport,
Backing, ...); timestamps become aware UTC datetimes (None when the daemon left
them unset).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
from typing import (Any, Dict, Literal, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union,
                    cast, get_args)

import grpc

from xferd.blocks import unpack_u64
from xferd.errors import code_from_number, error_for
from xferd.shm import ShmMapping
from xferd.v1 import common_pb2, xferd_pb2

__all__ = [
    "Backing",
    "Direction",
    "EventKind",
    "NodeState",
    "PeerState",
    "Priority",
    "PriorityStats",
    "TransferState",
    "Transport",
    "Unset",
    "Status",
    "Region",
    "RegionEvent",
    "Peer",
    "Transfer",
    "WriteSpec",
    "Layout",
    "NodeInfo",
    "Stats",
    "TERMINAL_STATES",
]

# The enumerations, as the strings the snapshots carry. Each also admits
# "unspecified" (the daemon left the field unset) and "unknown" (a value of a
# newer daemon than this client knows).
Unset = Literal["unspecified", "unknown"]
#: How a daemon moves data: TCP, or RDMA verbs.
Transport = Literal["tcp", "verbs", Unset]
#: What a region's memory is (register_region takes the first three).
Backing = Literal["anonymous", "shm", "file", Unset]
#: A transfer's state; the last three are terminal.
TransferState = Literal["queued", "running", "done", "failed", "cancelled", Unset]
#: "write": src here, dst on the peer; "read": src on the peer, dst here.
Direction = Literal["write", "read", Unset]

#: A transfer's class (docs/priorities.md): critical goes before everything;
#: normal (the default), bulk and background share the rest by weight.
Priority = Literal["critical", "normal", "bulk", "background", Unset]
#: A peer's lanes: being set up, usable, or broken (Peer.last_error says why).
PeerState = Literal["connecting", "connected", "broken", Unset]
#: A watched region's event.
EventKind = Literal["subscribed", "landed", "deregistered", Unset]
#: A cluster node: the daemon that answered ("self") or another live one.
NodeState = Literal["self", "live", "cached", "unknown"]

#: Transfer states after which nothing changes any more.
TERMINAL_STATES = frozenset({"done", "failed", "cancelled"})


@functools.lru_cache(maxsize=None)
def _enum_name(enum_type: Any, value: int, prefix: str, names: Any) -> Any:
    """TRANSPORT_KIND_TCP -> "tcp": one of the strings of Literal `names`,
    "unknown" for a number this client does not know. Cached: every
    snapshot converts a few, and the answers never change."""
    try:
        name: str = enum_type.Name(value)
    except ValueError:
        return "unknown"
    name = name[len(prefix):].lower() if name.startswith(prefix) else name.lower()
    return name if name in get_args(names) else "unknown"


def priority_name(value: int) -> Priority:
    """The readable name of a Priority number ("critical", "normal", ...)."""
    return cast(Priority, _enum_name(xferd_pb2.Priority, value, "PRIORITY_", Priority))


def transport_name(value: int) -> Transport:
    """The readable name of a TransportKind number ("tcp", "verbs")."""
    return cast(Transport,
                _enum_name(common_pb2.TransportKind, value, "TRANSPORT_KIND_", Transport))


def _time(ts: Any) -> Optional[datetime.datetime]:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return cast(datetime.datetime, ts.ToDatetime(tzinfo=datetime.timezone.utc))


def _duration(d: Any) -> datetime.timedelta:
    return datetime.timedelta(seconds=d.seconds, microseconds=d.nanos // 1000)


_T = TypeVar("_T")


def _build(cls: Type[_T], message: Any, **converted: Any) -> _T:
    """Makes dataclass `cls` from a protobuf message: fields given in
    `converted` take those values, the other public fields are copied from
    the message field of the same name."""
    values = {}
    for name in _field_names(cast(type, cls)):
        if name in converted:
            values[name] = converted[name]
        elif not name.startswith("_"):
            values[name] = getattr(message, name)
    return cls(**values)


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> Tuple[str, ...]:
    """A dataclass's field names, looked up once per class."""
    return tuple(field.name for field in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True)
class Status:
    """An error reported inside a message: gRPC code plus message."""

    code: grpc.StatusCode
    message: str

    @classmethod
    def from_proto(cls, error: Any) -> Optional["Status"]:
        """Internal: converts an xferd.v1.Error (None when the code is OK)."""
        if error.code == 0:
            return None
        return cls(code_from_number(error.code), error.message)


@dataclasses.dataclass(frozen=True)
class Region:
    """A region registered on a daemon.

    For SHM regions, `buffer` is a writable view of the region's memory,
    mapped lazily (MAP_SHARED, no copies) from the sealed memfd the daemon's
    local socket hands over, so only a client on the daemon's host has one
    (`xferd.shm`). The client that returned the region unmaps it on
    deregister_region() and close().
    `numa_node` is the node its memory is bound to (-1: not bound).
    `lost` is set once the region lost its memory (a file region whose file
    another process truncated): every transfer using it fails with that
    until it is deregistered.
    """

    name: str
    size: int
    backing: Backing
    remote_write: bool
    remote_read: bool
    file_path: Optional[str]
    hugepages: bool
    allowed_peers: Tuple[str, ...]
    transfers_in_flight: int
    landed_events: int
    registered_at: Optional[datetime.datetime]
    transport: Transport
    landed_ranges: bool
    numa_node: int
    lost: Optional[Status]
    #: The tenant that registered it, and the tenants it is shared with
    #: (docs/tenants.md).
    tenant: str = ""
    shared_with: Tuple[str, ...] = ()
    _mapping: Optional[ShmMapping] = dataclasses.field(
        default=None, repr=False, compare=False)

    @property
    def buffer(self) -> memoryview:
        """The region's bytes, writable, for SHM regions.

        Raises:
            ValueError: the region is not SHM-backed, its mapping was closed,
                or this client is not on the daemon's host.
            XferdError: the daemon no longer has the region (NotFound), or
                the local socket found over TCP is another daemon's
                (FailedPrecondition).
        """
        if self._mapping is None:
            raise ValueError(
                f"region '{self.name}' is {self.backing}-backed: only shm regions have a buffer")
        return self._mapping.view()

    def _shm(self) -> ShmMapping:
        if self._mapping is None:
            raise ValueError(f"region '{self.name}' is {self.backing}-backed: only shm regions "
                             "can be viewed as arrays")
        return self._mapping

    def numpy(self, dtype: Any, shape: Union[int, Sequence[int], None] = None,
              offset: int = 0) -> Any:
        """A numpy array of `dtype` and `shape` over the region's memory from
        `offset` (shape None: 1-D over the rest of the region), no copy.

        The array (an `xferd.arrays.RegionArray`) and the views numpy makes
        of it raise ValueError on access once the region is deregistered or
        its client closed.

        Raises:
            ValueError: not an shm region, the view does not fit it, or the
                mapping is closed.
        """
        from xferd import arrays  # numpy is optional: imported on use

        return arrays.numpy_view(self._shm(), dtype, shape, offset)

    def torch(self, dtype: Any, shape: Union[int, Sequence[int], None] = None,
              offset: int = 0) -> Any:
        """A CPU torch tensor of `dtype` and `shape` over the region's memory
        from `offset`, no copy; checked on access as numpy().

        Raises:
            ImportError: torch is not installed.
            ValueError: as numpy().
        """
        from xferd import arrays

        return arrays.torch_view(self._shm(), dtype, shape, offset)

    def fill(self, array: Any) -> Any:
        """Copies `array` (numpy, or a CPU torch tensor; any strides) to the
        start of the region and returns the region's view of the same shape
        and dtype (numpy() or torch()).

        Raises:
            ValueError: as numpy(), e.g. the array is larger than the region.
        """
        from xferd import arrays

        return arrays.fill(self._shm(), array)

    @classmethod
    def from_proto(cls, r: Any, mapping: Optional[ShmMapping] = None) -> "Region":
        """Internal: converts an xferd.v1.Region."""
        return _build(
            cls, r,
            backing=_enum_name(common_pb2.RegionBacking, r.backing, "REGION_BACKING_", Backing),
            remote_write=r.access.remote_write,
            remote_read=r.access.remote_read,
            file_path=r.file_path or None,
            allowed_peers=tuple(r.allowed_peers),
            registered_at=_time(r.registered_at),
            transport=transport_name(r.transport),
            lost=Status.from_proto(r.lost),
            shared_with=tuple(r.shared_with),
            _mapping=mapping,
        )


@dataclasses.dataclass(frozen=True)
class RegionEvent:
    """An event of a watched region: "subscribed", "landed" or "deregistered".

    For "landed": the byte range a transfer wrote (for a many-block transfer,
    from its lowest to its highest byte), its `blocks` and payload `bytes`,
    the node id and transfer id of the writer, and the region's sequence
    number of the landing (from 1). `read` is True when this daemon read the
    data from `source_node` (then the transfer id is this daemon's), False
    when `source_node` wrote it. `dropped` counts events skipped before this
    one because the reader was slow.

    `ranges`, for a watch that asked (`watch_region(..., ranges=True)`) on a
    region registered with `landed_ranges`: the (offsets, lengths) of the
    byte ranges a many-block transfer landed in (by offset, blocks side by
    side merged), as numpy uint64 arrays when numpy is importable, else
    array.array('Q');
    None otherwise. `ranges_missing` is True when the daemon could not keep
    them (its bound on held ranges, or the writer could not send them).
    """

    kind: EventKind
    region: str
    offset: int
    length: int
    source_node: str
    source_transfer_id: int
    sequence: int
    time: Optional[datetime.datetime]
    dropped: int
    blocks: int
    bytes: int
    read: bool
    ranges: Optional[Tuple[Any, Any]]
    ranges_missing: bool

    @classmethod
    def from_proto(cls, e: Any) -> "RegionEvent":
        """Internal: converts an xferd.v1.RegionEvent."""
        ranges = None
        if e.range_offsets:
            ranges = (unpack_u64(e.range_offsets), unpack_u64(e.range_lengths))
        return _build(cls, e,
                      kind=_enum_name(xferd_pb2.RegionEvent.Kind, e.kind, "KIND_", EventKind),
                      time=_time(e.time), ranges=ranges)


@dataclasses.dataclass(frozen=True)
class Peer:
    """Another daemon this one has lanes to.

    `state` is "connecting", "connected" or "broken"; `last_error` says why a
    broken peer broke.
    """

    node_id: str
    address: str
    transport: Transport
    state: PeerState
    lanes: int
    outbound: bool
    last_error: Optional[Status]
    connected_at: Optional[datetime.datetime]
    bytes_sent: int
    bytes_received: int
    device: str

    @classmethod
    def from_proto(cls, p: Any) -> "Peer":
        """Internal: converts an xferd.v1.Peer."""
        return _build(cls, p,
                      transport=transport_name(p.transport),
                      state=_enum_name(xferd_pb2.Peer.State, p.state, "STATE_", PeerState),
                      last_error=Status.from_proto(p.last_error),
                      connected_at=_time(p.connected_at))


@dataclasses.dataclass(frozen=True)
class Transfer:
    """A snapshot of a transfer.

    `state` is "queued", "running", "done", "failed" or "cancelled"; `error`
    is set for the last two. `direction` is "write" (src local, dst on the
    peer) or "read" (src on the peer, dst local). A many-block transfer has
    `blocks` > 1, `length` is their total bytes and the offsets are 0.
    """

    id: int
    state: TransferState
    src_region: str
    src_offset: int
    peer: str
    dst_region: str
    dst_offset: int
    length: int
    bytes_done: int
    slice_size: int
    slices: int
    transport: Transport
    error: Optional[Status]
    submitted_at: Optional[datetime.datetime]
    finished_at: Optional[datetime.datetime]
    batch_id: int
    label: str
    direction: Direction
    blocks: int
    priority: Priority
    #: The tenant that submitted it (docs/tenants.md); empty in a ring's
    #: completion, which does not carry it.
    tenant: str = ""
    #: Whether its blocks are verified end to end (docs/integrity.md).
    verify: bool = False
    #: A verified transfer that ended done: the CRC-64 of
    #: each block as its source sent it, packed little-endian uint64 in the
    #: order of the request's blocks (numpy.frombuffer(c, "<u8")). Store it
    #: beside the data; pass it back as a read's expected_checksums to check
    #: a restore. Empty otherwise, in list_transfers(), and through the
    #: request rings for a transfer of more than 64 (verified by the
    #: daemon's default: the clients send those they ask to verify over
    #: gRPC).
    checksums: bytes = b""

    @property
    def terminal(self) -> bool:
        """True once the transfer ended (done, failed or cancelled)."""
        return self.state in TERMINAL_STATES

    def raise_for_state(self) -> "Transfer":
        """Returns self unless the transfer failed or was cancelled.

        Raises:
            XferdError: the subclass for the transfer's error code, with
                `transfer` set to this snapshot.
        """
        if self.state in ("failed", "cancelled"):
            error = self.error or Status(grpc.StatusCode.UNKNOWN, f"transfer {self.state}")
            raise error_for(error.code, error.message, transfer=self)
        return self

    @classmethod
    def _of(cls, fields: Dict[str, Any]) -> "Transfer":
        """Internal: the snapshot of `fields`, every field by name. A frozen
        dataclass's __init__ sets each field through object.__setattr__:
        3 µs for these 19, a tenth of a ring write's client side; this
        fills the instance's dict at once (the class is not slotted)."""
        snapshot = object.__new__(cls)
        snapshot.__dict__.update(fields)
        return snapshot

    @classmethod
    def from_proto(cls, t: Any) -> "Transfer":
        """Internal: converts an xferd.v1.Transfer."""
        return _build(cls, t,
                      state=_enum_name(common_pb2.TransferState, t.state, "TRANSFER_STATE_",
                                       TransferState),
                      transport=transport_name(t.transport),
                      error=Status.from_proto(t.error),
                      direction=_enum_name(xferd_pb2.Transfer.Direction, t.direction,
                                           "DIRECTION_", Direction),
                      priority=priority_name(t.priority),
                      submitted_at=_time(t.submitted_at),
                      finished_at=_time(t.finished_at))


@dataclasses.dataclass(frozen=True)
class WriteSpec:
    """One write of a batch: `length` bytes of local `src_region` from
    `src_offset` into `dst_region` of `peer` (node id or address) at
    `dst_offset`. `timeout` (seconds) bounds the transfer; `slice_size` 0 is
    the daemon's default; `priority` its class (Priority); `verify` checks
    its blocks end to end (None: the daemon's engine.verify)."""

    src_region: str
    peer: str
    dst_region: str
    length: int
    src_offset: int = 0
    dst_offset: int = 0
    slice_size: int = 0
    timeout: Optional[float] = None
    label: str = ""
    priority: str = "normal"
    verify: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class Layout:
    """A prepared layout: `blocks` equal blocks of `block_length` bytes in
    `region`, local (`peer` None) or on `peer` (its node id or address).
    Transfers name its blocks by index, 0 .. blocks-1."""

    name: str
    peer: Optional[str]
    region: str
    block_length: int
    blocks: int

    @classmethod
    def from_proto(cls, layout: Any) -> "Layout":
        """Internal: converts an xferd.v1.Layout."""
        return _build(cls, layout, peer=layout.peer or None)


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """Who a daemon is and how it moves data (`transport`: "tcp" or "verbs")."""

    node_id: str
    version: str
    transport: Transport
    device: str
    transport_reason: str
    grpc_address: str
    unix_socket: str
    pollers: int
    default_slice_size: int
    started_at: Optional[datetime.datetime]
    pid: int
    #: "mtls ..." or "insecure ...": how peers and remote clients are authenticated.
    security: str = ""
    #: A [cluster] section is configured, and the daemon's keys are live in etcd.
    directory_enabled: bool = False
    directory_connected: bool = False
    #: The daemon's cache of the directory: the etcd revision it reflects,
    #: whether its etcd watch is open, and how often it was read whole again
    #: after etcd compacted what the watch was to resume from.
    directory_revision: int = 0
    directory_watching: bool = False
    directory_relists: int = 0
    #: The caller's tenant (docs/tenants.md): "default" without [tenants].
    tenant: str = ""

    @classmethod
    def from_proto(cls, n: Any) -> "NodeInfo":
        """Internal: converts an xferd.v1.NodeInfo."""
        return _build(cls, n, transport=transport_name(n.transport),
                      started_at=_time(n.started_at),
                      directory_enabled=n.directory.enabled,
                      directory_connected=n.directory.connected,
                      directory_revision=n.directory.revision,
                      directory_watching=n.directory.watching,
                      directory_relists=n.directory.relists)


@dataclasses.dataclass(frozen=True)
class DirectoryRegion:
    """A region as the cluster directory publishes it: no addresses, no keys."""

    node_id: str
    name: str
    size: int
    backing: Backing
    remote_write: bool
    remote_read: bool
    allowed_peers: Tuple[str, ...]

    @classmethod
    def from_proto(cls, r: Any) -> "DirectoryRegion":
        """Internal: converts an xferd.v1.DirectoryRegion."""
        return _build(cls, r,
                      backing=_enum_name(common_pb2.RegionBacking, r.backing, "REGION_BACKING_",
                                         Backing),
                      remote_write=r.access.remote_write, remote_read=r.access.remote_read,
                      allowed_peers=tuple(r.allowed_peers))


@dataclasses.dataclass(frozen=True)
class ClusterNode:
    """A live daemon of the cluster directory. `state`: "self" (the daemon
    that answered), "live" (its watch of etcd is open) or "cached" (etcd is
    out of reach: the record as last seen)."""

    node_id: str
    address: str
    transport: Transport
    device: str
    version: str
    identity: Tuple[str, ...]
    state: NodeState
    regions: Tuple[DirectoryRegion, ...]

    @classmethod
    def from_proto(cls, c: Any) -> "ClusterNode":
        """Internal: converts an xferd.v1.ClusterNode."""
        n = c.node
        return cls(node_id=n.node_id, address=n.address, transport=transport_name(n.transport),
                   device=n.device, version=n.version, identity=tuple(n.identity),
                   state=c.state if c.state in get_args(NodeState) else "unknown",
                   regions=tuple(DirectoryRegion.from_proto(r) for r in c.regions))


@dataclasses.dataclass(frozen=True)
class DeviceStats:
    """One RDMA device the daemon's verbs transport drives: whether its port
    is up, its NUMA node (-1 unknown), port rate (Mb/s, 0 unknown), the
    payload bytes of this daemon's writes (`bytes_sent`) and reads
    (`bytes_received`) that completed on it, ops moved off it after it
    failed, the device pairs of live links put back in service on it after
    they broke (`rejoins`), the memory windows open on it (one per key a
    peer holds) against the device's limit, and the CPUs the pollers homed
    on it are pinned to (empty: not pinned)."""

    name: str
    port: int
    up: bool
    numa_node: int
    rate_mbps: int
    bytes_sent: int
    bytes_received: int
    failovers: int
    rejoins: int
    memory_windows: int
    max_memory_windows: int
    poller_cpus: Tuple[int, ...]

    @classmethod
    def from_proto(cls, d: Any) -> "DeviceStats":
        """Internal: converts an xferd.v1.DeviceStats."""
        return _build(cls, d, poller_cpus=tuple(d.poller_cpus))


@dataclasses.dataclass(frozen=True)
class Stats:
    """A daemon's counters. `errors` maps status code names (e.g.
    "UNAVAILABLE") to the number of transfers that failed with them;
    `refused` the same for requests refused before any transfer started."""

    uptime: datetime.timedelta
    transport: Transport
    transfers_submitted: int
    transfers_done: int
    transfers_failed: int
    transfers_cancelled: int
    transfers_in_flight: int
    bytes_sent: int
    bytes_received: int
    landed_events: int
    regions: int
    registered_bytes: int
    peers: int
    lanes: int
    pollers: int
    errors: Mapping[str, int]
    rejected_writes: int
    resident_bytes: int
    open_fds: int
    threads: int
    open_lanes: int
    memory_registrations: int
    refused: Mapping[str, int]
    # Verbs: each RDMA device the daemon drives; empty on TCP.
    devices: Tuple[DeviceStats, ...] = ()
    # Transfers by class, critical first.
    priorities: Tuple["PriorityStats", ...] = ()
    # Every tenant of the daemon, by name ("default" included).
    tenants: Tuple["TenantStats", ...] = ()

    @classmethod
    def from_proto(cls, s: Any) -> "Stats":
        """Internal: converts an xferd.v1.Stats."""
        return _build(cls, s, uptime=_duration(s.uptime), transport=transport_name(s.transport),
                      errors=types.MappingProxyType(dict(s.errors)),
                      refused=types.MappingProxyType(dict(s.refused)),
                      devices=tuple(DeviceStats.from_proto(d) for d in s.devices),
                      priorities=tuple(PriorityStats.from_proto(p) for p in s.priorities),
                      tenants=tuple(TenantStats.from_proto(t) for t in s.tenants))


@dataclasses.dataclass(frozen=True)
class TenantStats:
    """One tenant's limits (0: none of its own), what it uses now, its
    counts so far, and its refusals: by a limit (`refused_quota`) and for a
    class above its max_priority or another tenant's object
    (`refused_access`). See docs/tenants.md."""

    name: str
    max_registered_bytes: int
    max_inflight_transfers: int
    max_priority: Priority
    registered_bytes: int
    transfers_in_flight: int
    transfers_submitted: int
    bytes: int
    refused_quota: int
    refused_access: int
    #: Bytes per second its transfers may post (0: no cap), and its weight
    #: beside other tenants' transfers of the same class.
    max_bandwidth: int = 0
    weight: int = 1
    #: An operators' tenant, which sees and acts on every tenant's objects.
    admin: bool = False
    #: Of its transfers that ended, those that had posted an op, and their
    #: mean wait from submission to it.
    transfers_started: int = 0
    mean_queue_wait: datetime.timedelta = datetime.timedelta(0)

    @classmethod
    def from_proto(cls, t: Any) -> "TenantStats":
        """Internal: converts an xferd.v1.TenantStats."""
        return _build(cls, t, max_priority=priority_name(t.max_priority),
                      mean_queue_wait=_duration(t.mean_queue_wait))


@dataclasses.dataclass(frozen=True)
class PriorityStats:
    """One priority class's transfers since the daemon started: submitted,
    ended (done, failed, cancelled), refused before they started, in flight
    now, the payload bytes of those that ended, and of those that had
    posted an op (`started`) their mean wait from submission to it."""

    priority: Priority
    submitted: int
    done: int
    failed: int
    cancelled: int
    refused: int
    in_flight: int
    bytes: int
    started: int
    mean_queue_wait: datetime.timedelta

    @classmethod
    def from_proto(cls, p: Any) -> "PriorityStats":
        """Internal: converts an xferd.v1.PriorityStats."""
        return _build(cls, p, priority=priority_name(p.priority),
                      mean_queue_wait=_duration(p.mean_queue_wait))


@dataclasses.dataclass(frozen=True)
class RdmaGid:
    """One GID of an RDMA port; `in_use` marks the one the daemon uses."""

    index: int
    gid: str
    type: str
    netdev: str
    in_use: bool

    @classmethod
    def from_proto(cls, g: Any) -> "RdmaGid":
        """Internal: converts an xferd.v1.RdmaGid."""
        return _build(cls, g)


@dataclasses.dataclass(frozen=True)
class RdmaPort:
    """One port of an RDMA device (state, link layer, MTUs, LID, GIDs)."""

    number: int
    state: str
    link_layer: str
    active_mtu: int
    max_mtu: int
    lid: int
    gids: Tuple[RdmaGid, ...]
    in_use: bool

    @classmethod
    def from_proto(cls, p: Any) -> "RdmaPort":
        """Internal: converts an xferd.v1.RdmaPort."""
        return _build(cls, p, gids=tuple(RdmaGid.from_proto(g) for g in p.gids))


@dataclasses.dataclass(frozen=True)
class RdmaDevice:
    """An RDMA device of the daemon's host, as `ibv_devinfo` shows it."""

    name: str
    node_guid: str
    ports: Tuple[RdmaPort, ...]
    error: str
    numa_node: int = -1
    # The daemon drives this device; `stats` then has its counters.
    in_use: bool = False
    stats: Optional[DeviceStats] = None

    @classmethod
    def from_proto(cls, d: Any) -> "RdmaDevice":
        """Internal: converts an xferd.v1.RdmaDevice."""
        return _build(cls, d, ports=tuple(RdmaPort.from_proto(p) for p in d.ports),
                      stats=DeviceStats.from_proto(d.stats) if d.in_use else None)
