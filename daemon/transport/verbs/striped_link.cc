#include "daemon/transport/verbs/striped_link.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"

namespace xferd::transport::verbs {
namespace {

PairingDevice ForPairing(const DeviceEndpoints& d) {
  PairingDevice p;
  p.name = d.name;
  if (!d.queue_pairs.empty()) p.gid = d.queue_pairs[0].gid;
  return p;
}

}  // namespace

uint64_t StripedLink::PairRate(uint64_t ours, uint64_t theirs) {
  return ours == 0 || theirs == 0 ? 0 : std::min(ours, theirs);
}

StripedLink::StripedLink(PeerIdentity peer, std::vector<LinkDevice> devices,
                         std::vector<StripedWorker*> pollers, DeviceLinkSink add_device_link)
    : Link(std::move(peer)),
      devices_(std::move(devices)),
      pollers_(std::move(pollers)),
      add_device_link_(std::move(add_device_link)),
      // The READ depths offered: the transport's, the same on every device.
      max_rd_atomic_(devices_.front().settings.max_rd_atomic),
      max_dest_rd_atomic_(devices_.front().settings.max_dest_rd_atomic) {}

StripedLink::~StripedLink() = default;

absl::StatusOr<std::shared_ptr<VerbsLink>> StripedLink::NewDeviceLink(uint32_t device,
                                                                      uint32_t lanes) {
  const LinkDevice& d = devices_[device];
  std::vector<VerbsWorker*> workers;
  for (StripedWorker* poller : pollers_) workers.push_back(&poller->device(device));
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsLink> link,
                   VerbsLink::Create(d.context, std::move(workers), d.settings, peer(), lanes, this,
                                     weak_from_this(), [this] { OnDeviceLinkClosed(); }));
  add_device_link_(device, link);
  return link;
}

absl::Status StripedLink::AddDeviceLink(uint32_t device, uint32_t lanes) {
  ASSIGN_OR_RETURN(std::shared_ptr<VerbsLink> link, NewDeviceLink(device, lanes));
  DevicePairLink pair;
  pair.link = std::move(link);
  pair.local_device = device;
  pair.rate_mbps = devices_[device].context->port.rate_mbps;
  device_links_.push_back(std::move(pair));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<StripedLink>> StripedLink::Create(
    const std::vector<LinkDevice>& devices, const std::vector<StripedWorker*>& pollers,
    uint32_t lanes, const DeviceLinkSink& add_device_link) {
  auto link = std::shared_ptr<StripedLink>(
      new StripedLink(PeerIdentity{}, devices, pollers, add_device_link));
  for (uint32_t d = 0; d < devices.size(); ++d) {
    if (absl::Status s = link->AddDeviceLink(d, lanes); !s.ok()) {
      link->Close(s);
      return s;
    }
  }
  return link;
}

void StripedLink::Describe(LinkEndpoints* out) const {
  out->kind = TransportKind::kVerbs;
  out->devices.clear();
  out->lanes = 0;
  for (const DevicePairLink& d : device_links_) {
    DeviceEndpoints e;
    d.link->Describe(&e);
    out->lanes = out->lanes == 0 ? static_cast<uint32_t>(e.queue_pairs.size())
                                 : std::min<uint32_t>(out->lanes, e.queue_pairs.size());
    out->devices.push_back(std::move(e));
  }
  out->notice_ring_slots = kNoticeSlots;
  out->max_rd_atomic = max_rd_atomic_;
  out->max_dest_rd_atomic = max_dest_rd_atomic_;
}

absl::StatusOr<std::shared_ptr<StripedLink>> StripedLink::Accept(
    const std::vector<LinkDevice>& devices, const std::vector<StripedWorker*>& pollers,
    const PeerIdentity& peer, uint32_t lanes, const LinkEndpoints& remote,
    const PairingOptions& pairing, const DeviceLinkSink& add_device_link, LinkEndpoints* local) {
  if (remote.kind != TransportKind::kVerbs || remote.devices.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("peer ", peer.node_id, " offered no RDMA device in its handshake"));
  }
  std::vector<PairingDevice> ours;
  for (const LinkDevice& d : devices) {
    PairingDevice p;
    p.name = d.context->port.device;
    p.gid = d.context->port.gid.raw;
    ours.push_back(p);
  }
  std::vector<PairingDevice> theirs;
  for (const DeviceEndpoints& d : remote.devices) theirs.push_back(ForPairing(d));
  ASSIGN_OR_RETURN(std::vector<DevicePair> pairs,
                   PairDevices(ours, theirs, pairing.pairing, pairing.prefix_bits));

  auto link =
      std::shared_ptr<StripedLink>(new StripedLink(peer, devices, pollers, add_device_link));
  // What the device links check against: the lanes both sides have.
  LinkEndpoints matched = remote;
  matched.lanes = lanes;
  local->kind = TransportKind::kVerbs;
  local->lanes = lanes;
  local->notice_ring_slots = kNoticeSlots;
  local->devices.clear();
  for (const DevicePair& pair : pairs) {
    const DeviceEndpoints& theirs_device = remote.devices[pair.remote];
    absl::Status s = link->AddDeviceLink(pair.local, lanes);
    DevicePairLink* added = s.ok() ? &link->device_links_.back() : nullptr;
    if (s.ok()) s = added->link->Activate(matched, theirs_device);
    if (!s.ok()) {
      link->Close(s);
      return s;
    }
    added->paired = true;
    added->remote_device = theirs_device.index;
    added->rate_mbps = PairRate(added->rate_mbps, theirs_device.rate_mbps);
    DeviceEndpoints e;
    added->link->Describe(&e);
    e.peer_device = theirs_device.index;
    local->devices.push_back(std::move(e));
  }
  local->max_rd_atomic = link->max_rd_atomic_;
  local->max_dest_rd_atomic = link->max_dest_rd_atomic_;
  link->BuildStripes(lanes, peer);
  return link;
}

absl::Status StripedLink::Connect(const PeerIdentity& remote_peer, const LinkEndpoints& remote,
                                  absl::Time) {
  set_peer(remote_peer);
  for (DevicePairLink& d : device_links_) d.link->BindPeer(remote_peer);
  absl::Status status;
  if (remote.kind != TransportKind::kVerbs) {
    status = absl::FailedPreconditionError(
        absl::StrCat("peer ", remote_peer.node_id, " uses the ", TransportKindName(remote.kind),
                     " transport but this daemon uses verbs: configure the same on both"));
  } else if (remote.devices.empty()) {
    status = absl::InvalidArgumentError(
        absl::StrCat("peer ", remote_peer.node_id, " answered with no RDMA device"));
  }
  for (const DeviceEndpoints& theirs : remote.devices) {
    if (!status.ok()) break;
    auto it = std::find_if(device_links_.begin(), device_links_.end(),
                           [&](const DevicePairLink& d) {
                             return d.local_device == theirs.peer_device && !d.paired;
                           });
    if (it == device_links_.end()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("peer ", remote_peer.node_id, " paired its device ", theirs.name,
                       " with our device #", theirs.peer_device,
                       ", which we did not offer or already paired"));
      break;
    }
    status = it->link->Activate(remote, theirs);
    it->paired = true;
    it->remote_device = theirs.index;
    it->rate_mbps = PairRate(it->rate_mbps, theirs.rate_mbps);
  }
  if (!status.ok()) {
    Close(status);
    return status;
  }
  // Our devices the peer did not pair (it has fewer, or none on their rail)
  // carry nothing towards it.
  for (DevicePairLink& d : device_links_) {
    if (!d.paired) d.link->Close(absl::CancelledError("device not paired with the peer's"));
  }
  BuildStripes(remote.lanes, remote_peer);
  return absl::OkStatus();
}

void StripedLink::BuildStripes(uint32_t lanes, const PeerIdentity& peer) {
  uint32_t slot = 0;
  for (DevicePairLink& d : device_links_) {
    if (d.paired) d.slot = slot++;
  }
  std::vector<std::string> names;
  for (uint32_t i = 0; i < lanes; ++i) {
    auto stripe = std::make_unique<StripedLane>(*this, weak_from_this(), *pollers_[i],
                                                device_links_.front().link->ops_depth());
    for (DevicePairLink& d : device_links_) {
      if (!d.paired) continue;
      stripe->AddDevice(d.link, &d.link->verbs_lane(i),
                        &pollers_[i]->device(d.local_device).context().failovers,
                        Weight(d.rate_mbps));
    }
    stripes_.push_back(std::move(stripe));
  }
  for (const DevicePairLink& d : device_links_) {
    if (d.paired) names.push_back(absl::StrCat(d.link->device().port.device, " (", d.rate_mbps,
                                               " Mb/s)"));
  }
  spdlog::info("link to {}: {} lanes striped over {}", peer.node_id, lanes,
               absl::StrJoin(names, ", "));
  lane_count_.store(lanes, std::memory_order_release);
  active_.store(true, std::memory_order_release);
  // A device link that broke before this saw no active link: look again.
  OnDeviceLinkClosed();
}

uint64_t StripedLink::Weight(uint64_t rate_mbps) const {
  // The pairs' rates, unless one is unknown; then equal shares.
  for (const DevicePairLink& d : device_links_) {
    if (d.paired && d.rate_mbps == 0) return 1;
  }
  return rate_mbps;
}

void StripedLink::OnDeviceLinkClosed() {
  if (broken() || !active_.load(std::memory_order_acquire)) return;
  absl::Status last;
  size_t paired = 0;
  {
    MutexLock lock(&mu_);
    for (const DevicePairLink& d : device_links_) {
      if (!d.paired) continue;
      if (!d.link->broken()) return;  // one still carries the link
      last = d.link->status();
      ++paired;
    }
  }
  // Outside mu_: Close takes it.
  Close(EveryDeviceBroke(peer().node_id, last, paired));
}

void StripedLink::Close(absl::Status reason) {
  if (!MarkBroken(std::move(reason))) return;
  const absl::Status why = status();
  std::vector<std::shared_ptr<VerbsLink>> links;
  {
    // Rejoins store fresh links under mu_ only while the link is not broken.
    MutexLock lock(&mu_);
    for (const DevicePairLink& d : device_links_) {
      for (const auto& l : {d.link, d.offered, d.accepted}) {
        if (l != nullptr) links.push_back(l);
      }
    }
  }
  // Outside mu_: each calls back OnDeviceLinkClosed.
  for (const auto& l : links) l->Close(why);
}

}  // namespace xferd::transport::verbs
