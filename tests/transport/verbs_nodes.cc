#include "tests/transport/verbs_nodes.h"

#include "absl/strings/str_cat.h"
#include "daemon/transport/verbs/device.h"
#include "tests/transport/transport_factories.h"

namespace xferd::transport::testing {

VerbsNodes::~VerbsNodes() {
  for (const std::shared_ptr<Link>& link : links_) {
    link->Close(absl::CancelledError("test over"));
  }
  // Queue pairs leave on their pollers' threads, once drained.
  Pump([this] {
    for (const auto& node : nodes_) {
      if (node->transport->stats().lanes > 0) return false;
    }
    return true;
  });
  links_.clear();
}

absl::StatusOr<VerbsNode*> VerbsNodes::Add(const std::string& name, bool memory_windows,
                                           uint64_t mr_chunk) {
  auto devices = verbs::QueryDevices();
  if (!devices.ok()) return devices.status();
  auto port = verbs::SelectPort(*devices, verbs::DeviceRequest{});
  if (!port.ok()) return port.status();
  auto node = std::make_unique<VerbsNode>();
  node->name = name;
  memory::RegistryOptions registry;
  node->regions = std::make_unique<memory::RegionRegistry>(registry);
  verbs::VerbsTransportOptions options;
  options.pollers = kPollers;
  options.lane_depth = 16;
  options.memory_windows = memory_windows;
  if (mr_chunk != 0) options.mr_chunk = mr_chunk;
  auto transport = verbs::VerbsTransport::Create(options, *port, *node->regions);
  if (!transport.ok()) return transport.status();
  node->transport = *std::move(transport);
  nodes_.push_back(std::move(node));
  return nodes_.back().get();
}

absl::StatusOr<LinkEnds> VerbsNodes::Connect(VerbsNode& from, VerbsNode& to) {
  LinkEnds ends;
  LinkEndpoints offer;
  absl::StatusOr<std::shared_ptr<Link>> initiator = from.transport->CreateLink(&offer);
  if (!initiator.ok()) return initiator.status();
  ends.initiator = *std::move(initiator);
  links_.push_back(ends.initiator);
  absl::StatusOr<std::shared_ptr<Link>> responder =
      to.transport->AcceptLink(PeerIdentity{from.name, 1}, offer, &ends.answer);
  if (!responder.ok()) return responder.status();
  ends.responder = *std::move(responder);
  links_.push_back(ends.responder);
  if (absl::Status s = ends.initiator->Connect(PeerIdentity{to.name, 1}, ends.answer,
                                                absl::Now() + kTimeout);
      !s.ok()) {
    return s;
  }
  if (!Pump([&] { return ends.initiator->ready() && ends.responder->ready(); })) {
    return absl::DeadlineExceededError(absl::StrCat(from.name, " -> ", to.name, " not ready"));
  }
  return ends;
}

void VerbsNodes::PumpOnce() {
  for (const auto& node : nodes_) {
    for (uint32_t i = 0; i < kPollers; ++i) node->transport->worker(i).Poll(node->sink);
  }
}

bool VerbsNodes::Pump(const std::function<bool()>& done, absl::Duration timeout) {
  return PumpUntil(
      done, [this] { PumpOnce(); }, timeout);
}

std::shared_ptr<memory::Region> VerbsNodes::Register(VerbsNode& node, const std::string& name,
                                                     uint64_t size, memory::Access access) {
  memory::RegionSpec spec;
  spec.name = name;
  spec.size = size;
  spec.access = access;
  absl::StatusOr<std::shared_ptr<memory::Region>> region =
      node.regions->Register(spec, node.transport.get());
  return region.ok() ? *std::move(region) : nullptr;
}

absl::StatusOr<RemoteRegion> VerbsNodes::Grant(VerbsNode& owner, Link& link,
                                               const memory::Region& region) {
  return GrantPumping(*owner.transport, link, region, [this] { PumpOnce(); }, kTimeout);
}

uint64_t VerbsNodes::PostWrite(VerbsNode& from, Link& link, uint32_t lane,
                               const memory::Region& src, const RemoteRegion& dst,
                               uint64_t offset, uint32_t length) {
  const uint64_t cookie = next_cookie_++;
  const DataOp op =
      OneBlockWrite(cookie, src, dst, &blocks_.emplace_back(Block{offset, offset, length}));
  Pump([&] { return link.lane(lane).credits() > 0; });
  if (link.lane(lane).Post({&op, 1}) != 1) {
    from.sink.done[cookie] = link.status();  // the lane broke: the op was not taken
  }
  return cookie;
}

absl::Status VerbsNodes::Wait(VerbsNode& node, uint64_t cookie) {
  if (!Pump([&] { return node.sink.done.count(cookie) > 0; })) {
    return absl::DeadlineExceededError("no completion");
  }
  return node.sink.done[cookie];
}

}  // namespace xferd::transport::testing
