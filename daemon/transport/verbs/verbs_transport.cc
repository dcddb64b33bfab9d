#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/verbs_registration.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::unique_ptr<VerbsTransport>> VerbsTransport::Create(
    const VerbsTransportOptions& options, const std::vector<PortSelection>& ports,
    const memory::RegionRegistry& regions) {
  if (options.mr_chunk < kMinMrChunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport.verbs_mr_chunk must be at least ", kMinMrChunk, " bytes"));
  }
  if (ports.empty()) return absl::InvalidArgumentError("the verbs transport needs a device");
  auto transport = std::unique_ptr<VerbsTransport>(new VerbsTransport(options));
  for (uint32_t d = 0; d < ports.size(); ++d) {
    auto device = std::make_unique<Device>();
    ASSIGN_OR_RETURN(device->context, VerbsContext::Open(ports[d], d));
    ASSIGN_OR_RETURN(VerbsLinkSettings settings, transport->SettingsFor(*device->context));
    device->link_device = LinkDevice{device->context, settings};
    transport->devices_.push_back(std::move(device));
  }
  // One READ depth per link, whatever device pair carries an op: the
  // smallest any device allows.
  uint8_t rd = 255, dest_rd = 255;
  for (const auto& d : transport->devices_) {
    rd = std::min(rd, d->link_device.settings.max_rd_atomic);
    dest_rd = std::min(dest_rd, d->link_device.settings.max_dest_rd_atomic);
  }
  for (auto& d : transport->devices_) {
    d->link_device.settings.max_rd_atomic = rd;
    d->link_device.settings.max_dest_rd_atomic = dest_rd;
  }
  for (uint32_t i = 0; i < options.pollers; ++i) {
    std::vector<std::unique_ptr<VerbsWorker>> per_device;
    for (const auto& d : transport->devices_) {
      ASSIGN_OR_RETURN(auto worker,
                       VerbsWorker::Create(d->context, options.cq_entries,
                                           d->link_device.settings.send_depth, regions));
      per_device.push_back(std::move(worker));
    }
    ASSIGN_OR_RETURN(auto striped, StripedWorker::Create(std::move(per_device)));
    if (options.numa_pinning) {
      // Each device gets pollers in turn: with one per node the pollers
      // spread over the nodes the devices sit on.
      Device& home = *transport->devices_[i % transport->devices_.size()];
      striped->set_preferred_cpus(NodeCpus(home.context->port.numa_node));
      for (uint32_t cpu : striped->preferred_cpus()) home.poller_cpus.insert(cpu);
    }
    transport->workers_.push_back(std::move(striped));
  }
  if (!options.memory_windows) {
    spdlog::warn(
        "verbs transport: memory windows off (transport.verbs_memory_windows = false): a region's "
        "keys work on any queue pair of this daemon, whichever peer they were given to");
  }
  for (auto& d : transport->devices_) {
    d->async = std::make_unique<AsyncEventThread>(
        d->context, [device = d.get()](absl::Status reason) { device->links.CloseAll(reason); });
    spdlog::info(
        "verbs transport: {} ({} pollers, {} ops per lane, RDMA READs per queue pair: {} out, {} "
        "in, NUMA node {})",
        d->context->port.description, options.pollers, options.lane_depth, rd, dest_rd,
        d->context->port.numa_node);
  }
  return transport;
}

VerbsTransport::VerbsTransport(const VerbsTransportOptions& options) : options_(options) {}

absl::StatusOr<VerbsLinkSettings> VerbsTransport::SettingsFor(const VerbsContext& context) const {
  const PortSelection& port = context.port;
  if (context.attr.max_qp_init_rd_atom <= 0 || context.attr.max_qp_rd_atom <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RDMA device ", port.device, " allows no outstanding RDMA READ (max_qp_init_rd_atom ",
        context.attr.max_qp_init_rd_atom, ", max_qp_rd_atom ", context.attr.max_qp_rd_atom,
        "): xferd needs RDMA READ; use another device or the tcp transport"));
  }
  if (options_.memory_windows &&
      ((context.attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0 ||
       context.attr.max_mw <= 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RDMA device ", port.device,
        " has no type-2B memory windows, which bind a peer's keys to its own queue pairs; set "
        "transport.verbs_memory_windows = false to run without (then any queue pair of this "
        "daemon's protection domain accepts a region's keys)"));
  }
  VerbsLinkSettings settings;
  settings.memory_windows = options_.memory_windows;
  settings.path.port = port.port;
  settings.path.ethernet = port.ethernet;
  settings.path.sgid_index = static_cast<uint8_t>(port.gid.index);
  settings.path.mtu = port.mtu;
  settings.path.timeout = options_.qp_timeout;
  settings.path.retry_count = options_.retry_count;
  settings.ops_depth = options_.lane_depth;
  // Room for lane_depth contiguous ops (ops of scattered blocks wait in the
  // lane for room) and for the worst case of one op at least, so none waits
  // forever; within what the device allows (refused below if less).
  const uint64_t send_depth =
      std::max<uint64_t>(uint64_t{options_.lane_depth} * kSendWrsPerOp, kMaxWrsPerOp);
  settings.send_depth = static_cast<uint32_t>(
      std::min<uint64_t>(send_depth, static_cast<uint64_t>(context.attr.max_qp_wr)));
  if (settings.send_depth < kMaxWrsPerOp) {
    return absl::FailedPreconditionError(
        absl::StrCat("RDMA device ", port.device, " allows ", context.attr.max_qp_wr,
                     " work requests per queue pair; xferd needs at least ", kMaxWrsPerOp,
                     " (one op of ", kMaxBlocksPerOp, " blocks)"));
  }
  settings.max_inline = options_.max_inline;
  // The handshake carries 8 bits of each, as ibv_qp_attr does.
  const auto depth = [&](int device_limit) {
    uint32_t d = std::min<uint32_t>(static_cast<uint32_t>(device_limit), 255);
    if (options_.max_rd_atomic != 0) d = std::min(d, options_.max_rd_atomic);
    return static_cast<uint8_t>(std::max<uint32_t>(d, 1));
  };
  settings.max_rd_atomic = depth(context.attr.max_qp_init_rd_atom);
  settings.max_dest_rd_atomic = depth(context.attr.max_qp_rd_atom);
  return settings;
}

VerbsTransport::~VerbsTransport() { Shutdown(); }

std::string VerbsTransport::device() const {
  std::vector<std::string> names;
  for (const auto& d : devices_) {
    names.push_back(absl::StrCat(d->context->port.device, ":", d->context->port.port));
  }
  return absl::StrJoin(names, ",");
}

std::vector<LinkDevice> VerbsTransport::LinkDevices() const {
  std::vector<LinkDevice> out;
  for (const auto& d : devices_) out.push_back(d->link_device);
  return out;
}

std::vector<StripedWorker*> VerbsTransport::Pollers() const {
  std::vector<StripedWorker*> out;
  for (const auto& w : workers_) out.push_back(w.get());
  return out;
}

StripedLink::DeviceLinkSink VerbsTransport::DeviceLinkSink() {
  return [this](uint32_t device, const std::shared_ptr<Link>& link) {
    devices_[device]->links.Add(link);
  };
}

absl::StatusOr<std::shared_ptr<Link>> VerbsTransport::CreateLink(LinkEndpoints* local) {
  ASSIGN_OR_RETURN(std::shared_ptr<StripedLink> link,
                   StripedLink::Create(LinkDevices(), Pollers(), options_.pollers,
                                       DeviceLinkSink()));
  links_.Add(link);
  link->Describe(local);
  return std::shared_ptr<Link>(std::move(link));
}

absl::StatusOr<std::shared_ptr<Link>> VerbsTransport::AcceptLink(const PeerIdentity& peer,
                                                                 const LinkEndpoints& remote,
                                                                 LinkEndpoints* local) {
  ASSIGN_OR_RETURN(const uint32_t lanes,
                   AcceptedLanes(TransportKind::kVerbs, options_.pollers, peer, remote));
  ASSIGN_OR_RETURN(std::shared_ptr<StripedLink> link,
                   StripedLink::Accept(LinkDevices(), Pollers(), peer, lanes, remote,
                                       options_.pairing, DeviceLinkSink(), local));
  links_.Add(link);
  return std::shared_ptr<Link>(std::move(link));
}

absl::StatusOr<RemoteRegion> VerbsTransport::GrantRegion(Link& link, const memory::Region& region,
                                                          absl::Time deadline) {
  const auto& registration = static_cast<const VerbsRegistration&>(*region.registration());
  // Links of this transport are striped links.
  if (options_.memory_windows) {
    return static_cast<StripedLink&>(link).Grant(region, registration, deadline);
  }
  RemoteRegion r{region.id(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                 registration.chunk_bytes(), registration.rkeys(0)};
  for (uint32_t d = 1; d < registration.devices(); ++d) {
    r.more_rkeys.push_back(registration.rkeys(d));
  }
  return r;
}

void VerbsTransport::RevokeRegion(const memory::Region& region, Link* link) {
  if (link != nullptr) {
    static_cast<StripedLink*>(link)->Revoke(region.id());
    return;
  }
  static_cast<const VerbsRegistration&>(*region.registration()).RevokeWindows();
}

absl::Status VerbsTransport::CheckRemoteRegion(const RemoteRegion& r, const Link& link) const {
  return CheckRemoteRegionKeys(r, link.lane_count());
}

absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> VerbsTransport::RegisterMemory(
    const memory::Region& region) {
  std::vector<std::shared_ptr<VerbsContext>> contexts;
  for (const auto& d : devices_) contexts.push_back(d->context);
  absl::StatusOr<std::unique_ptr<VerbsRegistration>> registration = VerbsRegistration::Create(
      std::move(contexts), region.data(), region.size(), region.access(),
      !region.backing().read_only(), options_.memory_windows, options_.mr_chunk,
      options_.registration_threads, registrations_);
  if (!registration.ok() && region.backing().read_only()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot register file region '", region.name(),
        "' for RDMA: ", region.backing().spec().file_path,
        " is not writable by the daemon, and the kernel refuses to pin read-only file mappings (",
        registration.status().message(), "), which memory windows need writable anyway; make "
        "the file writable by the daemon"));
  }
  if (!registration.ok()) return registration.status();
  return std::unique_ptr<memory::TransportRegistration>(*std::move(registration));
}

TransportStats VerbsTransport::stats() const {
  TransportStats stats;
  for (const auto& worker : workers_) {
    for (uint32_t d = 0; d < worker->device_count(); ++d) {
      stats.lanes += worker->device(d).queue_pairs();
    }
  }
  stats.memory_registrations = static_cast<uint32_t>(registrations_->load());
  for (const auto& d : devices_) {
    const VerbsContext& c = *d->context;
    DeviceStats s;
    s.memory_windows = static_cast<uint32_t>(c.windows.load(std::memory_order_relaxed));
    s.max_memory_windows = static_cast<uint32_t>(std::max(c.attr.max_mw, 0));
    stats.memory_windows += s.memory_windows;
    s.name = c.port.device;
    s.port = c.port.port;
    s.gid_index = c.port.gid.index;
    s.up = c.up.load(std::memory_order_relaxed);
    s.numa_node = c.port.numa_node;
    s.poller_cpus.assign(d->poller_cpus.begin(), d->poller_cpus.end());
    s.rate_mbps = c.port.rate_mbps;
    s.bytes_sent = c.bytes_sent.load(std::memory_order_relaxed);
    s.bytes_received = c.bytes_received.load(std::memory_order_relaxed);
    s.failovers = c.failovers.load(std::memory_order_relaxed);
    s.rejoins = c.rejoins.load(std::memory_order_relaxed);
    stats.devices.push_back(std::move(s));
  }
  return stats;
}

void VerbsTransport::Shutdown() {
  for (auto& d : devices_) d->async.reset();
  links_.CloseAll(absl::UnavailableError("daemon is shutting down"));
}

}  // namespace xferd::transport::verbs
