#include "daemon/service/proto_convert.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/base/endian.h"

namespace xferd::service {

v1::TransportKind ToProto(transport::TransportKind kind) {
  switch (kind) {
    case transport::TransportKind::kTcp:
      return v1::TRANSPORT_KIND_TCP;
    case transport::TransportKind::kVerbs:
      return v1::TRANSPORT_KIND_VERBS;
  }
  return v1::TRANSPORT_KIND_UNSPECIFIED;
}

void ToProto(absl::Time time, google::protobuf::Timestamp* out) {
  if (time == absl::InfinitePast() || time == absl::InfiniteFuture()) return;
  const timespec ts = absl::ToTimespec(time);
  out->set_seconds(ts.tv_sec);
  out->set_nanos(static_cast<int32_t>(ts.tv_nsec));
}

void ToProto(absl::Duration duration, google::protobuf::Duration* out) {
  const timespec ts = absl::ToTimespec(duration);
  out->set_seconds(ts.tv_sec);
  out->set_nanos(static_cast<int32_t>(ts.tv_nsec));
}

absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view what) {
  if (d.seconds() < 0 || d.nanos() < 0 || d.nanos() >= 1000000000 ||
      d.seconds() > 10LL * 365 * 24 * 3600) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be a positive duration"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void ToProto(const absl::Status& status, v1::Error* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(std::string(status.message()));
}

absl::StatusOr<memory::RegionSpec> FromProto(const v1::RegisterRegionRequest& r) {
  memory::RegionSpec spec;
  spec.name = r.name();
  spec.size = r.size();
  switch (r.backing()) {
    case v1::REGION_BACKING_UNSPECIFIED:
      return absl::InvalidArgumentError(absl::StrCat(
          "region '", r.name(),
          "' has no backing: choose anonymous (daemon memory), shm (memory local clients map) "
          "or file (a mapped file under regions.file_dirs)"));
    case v1::REGION_BACKING_ANONYMOUS:
      spec.backing = memory::Backing::kAnonymous;
      break;
    case v1::REGION_BACKING_SHM:
      spec.backing = memory::Backing::kShm;
      break;
    case v1::REGION_BACKING_FILE:
      spec.backing = memory::Backing::kFile;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown region backing ", r.backing(), ": choose anonymous, shm or file"));
  }
  spec.access.remote_write = r.access().remote_write();
  spec.access.remote_read = r.access().remote_read();
  spec.file_path = r.file_path();
  spec.create = r.create();
  spec.hugepages = r.hugepages();
  spec.landed_ranges = r.landed_ranges();
  if (r.has_numa_node()) {
    if (r.numa_node() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "numa_node ", r.numa_node(), " is negative: name a node (xferctl devices shows the "
          "NICs' nodes) or leave it unset"));
    }
    spec.numa_node = r.numa_node();
  }
  spec.allowed_peers.assign(r.allowed_peers().begin(), r.allowed_peers().end());
  spec.shared_with.assign(r.shared_with().begin(), r.shared_with().end());
  return spec;
}

void ToProto(const memory::Region& region, transport::TransportKind transport, v1::Region* out) {
  const memory::RegionSpec& spec = region.spec();
  out->set_name(spec.name);
  out->set_size(region.size());
  switch (spec.backing) {
    case memory::Backing::kAnonymous:
      out->set_backing(v1::REGION_BACKING_ANONYMOUS);
      break;
    case memory::Backing::kShm:
      out->set_backing(v1::REGION_BACKING_SHM);
      break;
    case memory::Backing::kFile:
      out->set_backing(v1::REGION_BACKING_FILE);
      break;
  }
  out->mutable_access()->set_remote_write(spec.access.remote_write);
  out->mutable_access()->set_remote_read(spec.access.remote_read);
  out->set_file_path(spec.file_path);
  out->set_hugepages(spec.hugepages);
  out->set_landed_ranges(spec.landed_ranges);
  out->set_numa_node(spec.numa_node);
  for (const std::string& peer : region.allowed_peers()) out->add_allowed_peers(peer);
  out->set_transfers_in_flight(region.users());
  out->set_landed_events(region.landed().published());
  if (region.lost()) ToProto(region.LostStatus(), out->mutable_lost());
  out->set_tenant(spec.owner);
  for (const std::string& tenant : spec.shared_with) out->add_shared_with(tenant);
  ToProto(region.registered_at(), out->mutable_registered_at());
  out->set_transport(ToProto(transport));
}

void ToProto(const memory::LandedEvent& event, const std::string& region, bool ranges,
             v1::RegionEvent* out) {
  out->set_kind(v1::RegionEvent::KIND_LANDED);
  out->set_region(region);
  out->set_offset(event.offset);
  out->set_length(event.length);
  out->set_source_node(event.source_node);
  out->set_source_transfer_id(event.source_transfer_id);
  out->set_sequence(event.sequence);
  ToProto(event.time, out->mutable_time());
  // A transport that does not count blocks reported one contiguous range.
  out->set_blocks(event.blocks == 0 ? 1 : event.blocks);
  out->set_bytes(event.blocks == 0 ? event.length : event.bytes);
  out->set_read(event.read);
  if (!ranges) return;
  if (event.ranges != nullptr) {
    out->set_range_offsets(event.ranges->offsets);
    out->set_range_lengths(event.ranges->lengths);
  }
  out->set_ranges_missing(event.ranges_missing);
}

namespace {

v1::TransferState ToProto(engine::TransferState state) {
  switch (state) {
    case engine::TransferState::kQueued:
      return v1::TRANSFER_STATE_QUEUED;
    case engine::TransferState::kRunning:
      return v1::TRANSFER_STATE_RUNNING;
    case engine::TransferState::kDone:
      return v1::TRANSFER_STATE_DONE;
    case engine::TransferState::kFailed:
      return v1::TRANSFER_STATE_FAILED;
    case engine::TransferState::kCancelled:
      return v1::TRANSFER_STATE_CANCELLED;
  }
  return v1::TRANSFER_STATE_UNSPECIFIED;
}

v1::Peer::State ToProto(engine::PeerState state) {
  switch (state) {
    case engine::PeerState::kConnecting:
      return v1::Peer::STATE_CONNECTING;
    case engine::PeerState::kConnected:
      return v1::Peer::STATE_CONNECTED;
    case engine::PeerState::kBroken:
      return v1::Peer::STATE_BROKEN;
  }
  return v1::Peer::STATE_UNSPECIFIED;
}

}  // namespace

void ToProto(const engine::TransferInfo& info, v1::Transfer* out) {
  out->set_id(info.id);
  out->set_state(ToProto(info.state));
  out->set_src_region(info.spec.src_region);
  out->set_src_offset(info.spec.src_offset);
  out->set_peer(info.peer_node);
  out->set_dst_region(info.spec.dst_region);
  out->set_dst_offset(info.spec.dst_offset);
  out->set_length(info.spec.length);
  out->set_bytes_done(info.bytes_done);
  out->set_slice_size(info.slice_size);
  out->set_slices(info.slices);
  out->set_transport(ToProto(info.transport));
  if (!info.error.ok()) ToProto(info.error, out->mutable_error());
  ToProto(info.submitted_at, out->mutable_submitted_at());
  if (engine::IsTerminal(info.state)) ToProto(info.finished_at, out->mutable_finished_at());
  out->set_batch_id(info.batch_id);
  out->set_label(info.spec.label);
  out->set_direction(engine::IsRead(info.spec) ? v1::Transfer::DIRECTION_READ
                                               : v1::Transfer::DIRECTION_WRITE);
  out->set_blocks(info.spec.request_blocks);
  out->set_priority(ToProto(info.spec.priority));
  if (info.started_at != absl::InfinitePast()) ToProto(info.started_at, out->mutable_started_at());
  if (info.spec.tenant != nullptr) out->set_tenant(info.spec.tenant->name());
  out->set_verify(info.spec.verify.value_or(false));
  if (info.checksums != nullptr) {
    std::string* packed = out->mutable_checksums();
    packed->resize(info.checksums->size() * sizeof(uint64_t));
    auto* p = reinterpret_cast<uint8_t*>(packed->data());
    for (uint64_t sum : *info.checksums) {
      StoreLE(p, sum);
      p += sizeof(uint64_t);
    }
  }
}

v1::Priority ToProto(engine::Priority priority) {
  return static_cast<v1::Priority>(engine::PriorityToWire(priority));
}

void ToProto(const engine::PeerInfo& info, v1::Peer* out) {
  out->set_node_id(info.node.node_id);
  out->set_address(info.node.address);
  out->set_transport(ToProto(info.transport));
  out->set_state(ToProto(info.state));
  out->set_lanes(info.lanes);
  out->set_outbound(info.outbound);
  if (!info.last_error.ok()) ToProto(info.last_error, out->mutable_last_error());
  ToProto(info.connected_at, out->mutable_connected_at());
  out->set_bytes_sent(info.bytes_sent);
  out->set_bytes_received(info.bytes_received);
  out->set_device(info.device);
}

void ToProto(const engine::EngineStats& s, const ProcessStats& process, absl::Duration uptime,
             transport::TransportKind transport, v1::Stats* out) {
  ToProto(uptime, out->mutable_uptime());
  out->set_transport(ToProto(transport));
  out->set_transfers_submitted(s.transfers.submitted);
  out->set_transfers_done(s.transfers.done);
  out->set_transfers_failed(s.transfers.failed);
  out->set_transfers_cancelled(s.transfers.cancelled);
  out->set_transfers_in_flight(s.transfers.in_flight);
  out->set_bytes_sent(s.bytes_sent);
  out->set_bytes_received(s.bytes_received);
  out->set_landed_events(s.landed_events);
  out->set_regions(s.regions);
  out->set_registered_bytes(s.registered_bytes);
  out->set_peers(s.peers);
  out->set_lanes(s.lanes);
  out->set_pollers(static_cast<uint32_t>(s.pollers.size()));
  for (const auto& [code, count] : s.transfers.errors) (*out->mutable_errors())[code] = count;
  for (const auto& [code, count] : s.transfers.refused) (*out->mutable_refused())[code] = count;
  out->set_rejected_writes(s.rejected_writes);
  out->set_resident_bytes(process.resident_bytes);
  out->set_open_fds(process.open_fds);
  out->set_threads(process.threads);
  out->set_open_lanes(s.transport.lanes);
  out->set_memory_registrations(s.transport.memory_registrations);
  for (const transport::DeviceStats& d : s.transport.devices) ToProto(d, out->add_devices());
  for (engine::Priority priority : engine::kAllPriorities) {
    const engine::PriorityCounters& c = s.transfers.by_priority[engine::PriorityIndex(priority)];
    v1::PriorityStats* p = out->add_priorities();
    p->set_priority(ToProto(priority));
    p->set_submitted(c.submitted);
    p->set_done(c.done);
    p->set_failed(c.failed);
    p->set_cancelled(c.cancelled);
    p->set_refused(c.refused);
    p->set_in_flight(c.in_flight);
    p->set_bytes(c.bytes);
    p->set_started(c.started);
    if (c.started > 0) ToProto(c.queue_wait / c.started, p->mutable_mean_queue_wait());
  }
  for (const engine::TenantStats& t : s.tenants) {
    v1::TenantStats* out_tenant = out->add_tenants();
    out_tenant->set_name(t.name);
    out_tenant->set_max_registered_bytes(t.max_registered_bytes);
    out_tenant->set_max_inflight_transfers(t.max_inflight_transfers);
    out_tenant->set_max_priority(ToProto(t.max_priority));
    out_tenant->set_registered_bytes(t.registered_bytes);
    out_tenant->set_transfers_in_flight(t.in_flight);
    out_tenant->set_transfers_submitted(t.submitted);
    out_tenant->set_bytes(t.bytes);
    out_tenant->set_refused_quota(t.refused_quota);
    out_tenant->set_refused_access(t.refused_access);
    out_tenant->set_max_bandwidth(t.max_bandwidth);
    out_tenant->set_weight(t.weight);
    out_tenant->set_admin(t.admin);
    out_tenant->set_transfers_started(t.started);
    if (t.started > 0) ToProto(t.queue_wait / t.started, out_tenant->mutable_mean_queue_wait());
  }
}

void ToProto(const transport::DeviceStats& d, v1::DeviceStats* out) {
  out->set_name(d.name);
  out->set_port(d.port);
  out->set_up(d.up);
  out->set_numa_node(d.numa_node);
  out->set_rate_mbps(d.rate_mbps);
  out->set_bytes_sent(d.bytes_sent);
  out->set_bytes_received(d.bytes_received);
  out->set_failovers(d.failovers);
  out->set_rejoins(d.rejoins);
  out->set_memory_windows(d.memory_windows);
  out->set_max_memory_windows(d.max_memory_windows);
  for (uint32_t cpu : d.poller_cpus) out->add_poller_cpus(cpu);
}

void ToProto(const std::vector<transport::DeviceInfo>& devices,
             const std::vector<transport::DeviceStats>& used,
             const std::optional<transport::RdmaPortInUse>& in_use, v1::ListDevicesResponse* out) {
  for (const transport::DeviceInfo& d : devices) {
    v1::RdmaDevice* device = out->add_devices();
    device->set_name(d.name);
    device->set_numa_node(d.numa_node);
    const transport::DeviceStats* driven = nullptr;
    for (const transport::DeviceStats& u : used) {
      if (u.name == d.name) driven = &u;
    }
    device->set_in_use(driven != nullptr);
    if (driven != nullptr) ToProto(*driven, device->mutable_stats());
    const uint64_t g = d.node_guid;
    device->set_node_guid(absl::StrFormat("%04x:%04x:%04x:%04x", g >> 48, (g >> 32) & 0xffff,
                                          (g >> 16) & 0xffff, g & 0xffff));
    device->set_error(d.error);
    for (const transport::PortInfo& p : d.ports) {
      v1::RdmaPort* port = device->add_ports();
      const bool used = driven != nullptr ? driven->port == p.number
                                          : in_use && in_use->device == d.name &&
                                                in_use->port == p.number;
      port->set_number(p.number);
      port->set_state(transport::PortStateName(p.state));
      port->set_link_layer(p.ethernet ? "Ethernet" : "InfiniBand");
      port->set_active_mtu(p.active_mtu);
      port->set_max_mtu(p.max_mtu);
      port->set_lid(p.lid);
      port->set_in_use(used);
      for (const transport::GidEntry& g : p.gids) {
        v1::RdmaGid* gid = port->add_gids();
        gid->set_index(g.index);
        gid->set_gid(g.ToString());
        gid->set_type(transport::GidTypeName(g.type));
        gid->set_netdev(g.netdev);
        gid->set_in_use(used && (driven != nullptr ? driven->gid_index : in_use->gid_index) ==
                                    g.index);
      }
    }
  }
}

}  // namespace xferd::service
