#include "daemon/transport/verbs/verbs_transport.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/verbs_registration.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::unique_ptr<VerbsTransport>> VerbsTransport::Create(
    const VerbsTransportOptions& options, const PortSelection& port,
    const memory::RegionRegistry& regions) {
  if (options.mr_chunk < kMinMrChunk) {
    return absl::InvalidArgumentError(
        absl::StrCat("transport.verbs_mr_chunk must be at least ", kMinMrChunk, " bytes"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsContext> context, VerbsContext::Open(port));
  if (context->attr.max_qp_init_rd_atom <= 0 || context->attr.max_qp_rd_atom <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "RDMA device ", port.device, " allows no outstanding RDMA READ (max_qp_init_rd_atom ",
        context->attr.max_qp_init_rd_atom, ", max_qp_rd_atom ", context->attr.max_qp_rd_atom,
        "): xferd needs RDMA READ; use another device or the tcp transport"));
  }
  auto transport = std::unique_ptr<VerbsTransport>(new VerbsTransport(options, context));
  const uint32_t send_depth = transport->link_settings_.send_depth;
  if (send_depth < kMaxWrsPerOp) {
    return absl::FailedPreconditionError(
        absl::StrCat("RDMA device ", port.device, " allows ", context->attr.max_qp_wr,
                     " work requests per queue pair; xferd needs at least ", kMaxWrsPerOp,
                     " (one op of ", kMaxBlocksPerOp, " blocks)"));
  }
  for (uint32_t i = 0; i < options.pollers; ++i) {
    ASSIGN_OR_RETURN(auto worker,
                     VerbsWorker::Create(context, options.cq_entries, send_depth, regions));
    transport->workers_.push_back(std::move(worker));
  }
  transport->async_ = std::make_unique<AsyncEventThread>(
      context, [t = transport.get()](absl::Status reason) { t->links_.CloseAll(reason); });
  spdlog::info(
      "verbs transport: {} ({} pollers, {} ops per lane, RDMA READs per queue pair: {} out, {} in)",
      port.description, options.pollers, options.lane_depth,
      transport->link_settings_.max_rd_atomic, transport->link_settings_.max_dest_rd_atomic);
  return transport;
}

VerbsTransport::VerbsTransport(const VerbsTransportOptions& options,
                               std::shared_ptr<VerbsContext> context)
    : options_(options), context_(std::move(context)) {
  const PortSelection& port = context_->port;
  link_settings_.path.port = port.port;
  link_settings_.path.ethernet = port.ethernet;
  link_settings_.path.sgid_index = static_cast<uint8_t>(port.gid.index);
  link_settings_.path.mtu = port.mtu;
  link_settings_.path.timeout = options.qp_timeout;
  link_settings_.path.retry_count = options.retry_count;
  link_settings_.ops_depth = options.lane_depth;
  // Room for lane_depth contiguous ops (ops of scattered blocks wait in the
  // lane for room) and for the worst case of one op at least, so none waits
  // forever; within what the device allows (Create refuses less than that).
  const uint64_t send_depth =
      std::max<uint64_t>(uint64_t{options.lane_depth} * kSendWrsPerOp, kMaxWrsPerOp);
  link_settings_.send_depth = static_cast<uint32_t>(
      std::min<uint64_t>(send_depth, static_cast<uint64_t>(context_->attr.max_qp_wr)));
  link_settings_.max_inline = options.max_inline;
  // The handshake carries 8 bits of each, as ibv_qp_attr does.
  const auto depth = [&](int device_limit) {
    uint32_t d = std::min<uint32_t>(static_cast<uint32_t>(device_limit), 255);
    if (options.max_rd_atomic != 0) d = std::min(d, options.max_rd_atomic);
    return static_cast<uint8_t>(std::max<uint32_t>(d, 1));
  };
  link_settings_.max_rd_atomic = depth(context_->attr.max_qp_init_rd_atom);
  link_settings_.max_dest_rd_atomic = depth(context_->attr.max_qp_rd_atom);
}

VerbsTransport::~VerbsTransport() { Shutdown(); }

std::string VerbsTransport::device() const {
  return absl::StrCat(context_->port.device, ":", context_->port.port);
}

absl::StatusOr<std::shared_ptr<VerbsLink>> VerbsTransport::NewLink(const PeerIdentity& peer,
                                                                   uint32_t lanes) {
  std::vector<VerbsWorker*> workers;
  for (const auto& worker : workers_) workers.push_back(worker.get());
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsLink> link,
                   VerbsLink::Create(context_, std::move(workers), link_settings_, peer, lanes));
  links_.Add(link);
  return link;
}

absl::StatusOr<std::shared_ptr<Link>> VerbsTransport::CreateLink(LinkEndpoints* local) {
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsLink> link, NewLink(PeerIdentity{}, options_.pollers));
  link->Describe(local);
  return std::shared_ptr<Link>(std::move(link));
}

absl::StatusOr<std::shared_ptr<Link>> VerbsTransport::AcceptLink(const PeerIdentity& peer,
                                                                 const LinkEndpoints& remote,
                                                                 LinkEndpoints* local) {
  ASSIGN_OR_RETURN(const uint32_t lanes,
                   AcceptedLanes(TransportKind::kVerbs, options_.pollers, peer, remote));
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsLink> link, NewLink(peer, lanes));
  // Activate takes the first lane_count() of the initiator's queue pairs;
  // the initiator trims the rest when it sees our answer.
  LinkEndpoints matched = remote;
  matched.lanes = link->lane_count();
  matched.queue_pairs.resize(std::min<size_t>(matched.queue_pairs.size(), matched.lanes));
  if (absl::Status s = link->Activate(matched); !s.ok()) {
    link->Close(s);
    return s;
  }
  link->Describe(local);
  return std::shared_ptr<Link>(std::move(link));
}

RemoteRegion VerbsTransport::DescribeRegion(const memory::Region& region) const {
  const auto& registration = static_cast<const VerbsRegistration&>(*region.registration());
  return RemoteRegion{region.id(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                      registration.chunk_bytes(), registration.rkeys()};
}

absl::Status VerbsTransport::CheckRemoteRegion(const RemoteRegion& r) const {
  return CheckRemoteRegionKeys(r);
}

absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> VerbsTransport::RegisterMemory(
    const memory::Region& region) {
  absl::StatusOr<std::unique_ptr<VerbsRegistration>> registration = VerbsRegistration::Create(
      context_, region.data(), region.size(), region.access(), !region.backing().read_only(),
      options_.mr_chunk, options_.registration_threads, registrations_);
  if (!registration.ok() && region.backing().read_only()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot register file region '", region.name(),
        "' for RDMA: ", region.backing().spec().file_path,
        " is not writable by the daemon, and the kernel refuses to pin read-only file mappings (",
        registration.status().message(), "); make the file writable by the daemon"));
  }
  if (!registration.ok()) return registration.status();
  return std::unique_ptr<memory::TransportRegistration>(*std::move(registration));
}

TransportStats VerbsTransport::stats() const {
  TransportStats stats;
  for (const auto& worker : workers_) stats.lanes += worker->queue_pairs();
  stats.memory_registrations = static_cast<uint32_t>(registrations_->load());
  return stats;
}

void VerbsTransport::Shutdown() {
  async_.reset();
  links_.CloseAll(absl::UnavailableError("daemon is shutting down"));
}

}  // namespace xferd::transport::verbs
