// StripedLink: a broken device pair back in service (transport.h, "Rejoin").
// The initiator offers fresh queue pairs for the pair; the responder creates
// its own, connects them and answers, but keeps them out of service until the
// initiator has connected its side too (CommitRejoin): until then writes from
// the responder would reach queue pairs not yet ready to receive, and time out.
// The fresh per-device link then replaces the broken one in every striped
// lane, handed over by each lane's poller.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/striped_link.h"

namespace xferd::transport::verbs {
namespace {

// A pair the peer accepted is left to the peer's commit this long before this
// end may offer it itself (a commit lost on the way).
constexpr absl::Duration kCommitWait = absl::Seconds(10);

}  // namespace

LinkEndpoints StripedLink::Shared() const {
  LinkEndpoints e;
  e.kind = TransportKind::kVerbs;
  e.lanes = lane_count();
  e.notice_ring_slots = kNoticeSlots;
  e.max_rd_atomic = max_rd_atomic_;
  e.max_dest_rd_atomic = max_dest_rd_atomic_;
  return e;
}

void StripedLink::Keep(std::shared_ptr<VerbsLink>* slot, std::shared_ptr<VerbsLink> fresh) {
  std::shared_ptr<VerbsLink> gone;
  {
    MutexLock lock(&mu_);
    // Close snapshots under mu_ after marking the link broken: a link stored
    // before that is closed by it, one refused here by us.
    if (fresh != nullptr && broken()) {
      gone = std::move(fresh);
    } else {
      gone = std::exchange(*slot, std::move(fresh));
    }
  }
  // Outside mu_: Close calls back OnDeviceLinkClosed.
  if (gone != nullptr) gone->Close(absl::CancelledError("replaced by a rejoin of its device pair"));
}

bool StripedLink::OfferRejoin(LinkEndpoints* offer) {
  MutexLock rejoin(&rejoin_mu_);
  *offer = Shared();
  if (!ready()) return false;
  const absl::Time now = absl::Now();
  for (DevicePairLink& d : device_links_) {
    std::shared_ptr<VerbsLink> current;
    {
      MutexLock lock(&mu_);
      current = d.link;
    }
    const VerbsContext& device = *devices_[d.local_device].context;
    if (!d.paired || !current->broken() || !device.up.load(std::memory_order_relaxed)) continue;
    // The peer is rejoining this pair: let its commit come.
    if (d.accepted != nullptr && now - d.accepted_at < kCommitWait) continue;
    if (!d.budget.Due(now, device.activations.load(std::memory_order_relaxed))) continue;
    d.budget.Tried(now);
    Keep(&d.accepted, nullptr);
    absl::StatusOr<std::shared_ptr<VerbsLink>> fresh = NewDeviceLink(d.local_device, offer->lanes);
    if (!fresh.ok()) {
      spdlog::warn("link to {}: no rejoin of {} this time: {}", peer().node_id, device.port.device,
                   fresh.status());
      continue;
    }
    DeviceEndpoints e;
    (*fresh)->Describe(&e);
    e.peer_device = d.remote_device;
    offer->devices.push_back(std::move(e));
    Keep(&d.offered, *std::move(fresh));
  }
  return !offer->devices.empty();
}

absl::Status StripedLink::AcceptRejoin(const LinkEndpoints& offer, bool keep_own,
                                       LinkEndpoints* answer) {
  MutexLock rejoin(&rejoin_mu_);
  *answer = Shared();
  if (!ready()) return absl::FailedPreconditionError("the link is not in service");
  if (offer.kind != TransportKind::kVerbs || offer.lanes != answer->lanes) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", peer().node_id,
                                                   " offered to rejoin with ", offer.lanes,
                                                   " lanes; the link has ", answer->lanes));
  }
  for (const DeviceEndpoints& theirs : offer.devices) {
    auto it = std::find_if(device_links_.begin(), device_links_.end(), [&](const auto& d) {
      return d.paired && d.local_device == theirs.peer_device && d.remote_device == theirs.index;
    });
    if (it == device_links_.end()) continue;  // not a pair of this link
    DevicePairLink& d = *it;
    const VerbsContext& device = *devices_[d.local_device].context;
    if (!device.up.load(std::memory_order_relaxed)) continue;  // the peer retries later
    // Both ends offered this pair at once: one offer stands (keep_own says
    // whose), the other end accepts it.
    if (d.offered != nullptr && keep_own) continue;
    Keep(&d.offered, nullptr);
    absl::StatusOr<std::shared_ptr<VerbsLink>> fresh = NewDeviceLink(d.local_device, offer.lanes);
    absl::Status s = fresh.status();
    if (s.ok()) s = (*fresh)->Activate(offer, theirs);
    if (!s.ok()) {
      spdlog::warn("link to {}: refused the rejoin of {}: {}", peer().node_id, device.port.device,
                   s);
      if (fresh.ok()) (*fresh)->Close(s);
      continue;
    }
    DeviceEndpoints e;
    (*fresh)->Describe(&e);
    e.peer_device = theirs.index;
    answer->devices.push_back(std::move(e));
    d.accepted_rate = PairRate(device.port.rate_mbps, theirs.rate_mbps);
    d.accepted_at = absl::Now();
    Keep(&d.accepted, *std::move(fresh));
    // Our side of the pair may still look fine (the peer's broke, or its
    // port went down): whatever it holds moves to the other devices now
    // rather than after the timeouts of a dead peer.
    std::shared_ptr<VerbsLink> old;
    {
      MutexLock lock(&mu_);
      old = d.link;
    }
    old->Close(absl::UnavailableError(
        absl::StrCat("peer ", peer().node_id, " is rejoining device pair ", device.port.device)));
  }
  return absl::OkStatus();
}

std::vector<uint32_t> StripedLink::ConnectRejoin(const LinkEndpoints& answer) {
  MutexLock rejoin(&rejoin_mu_);
  std::vector<uint32_t> joined;
  for (DevicePairLink& d : device_links_) {
    std::shared_ptr<VerbsLink> fresh;
    {
      MutexLock lock(&mu_);
      fresh = std::move(d.offered);
    }
    if (fresh == nullptr) continue;
    auto theirs = std::find_if(answer.devices.begin(), answer.devices.end(), [&](const auto& e) {
      return e.peer_device == d.local_device && e.index == d.remote_device;
    });
    // Closed meanwhile (its port went down): its lanes are with their
    // pollers now, not to be touched.
    absl::Status s = fresh->broken() ? fresh->status()
                     : theirs == answer.devices.end()
                         ? absl::UnavailableError("the peer did not take it")
                         : fresh->Activate(answer, *theirs);
    if (s.ok() && !ready()) s = absl::UnavailableError("the link closed");
    if (!s.ok()) {
      spdlog::info("link to {}: rejoin of {} not done: {}", peer().node_id,
                   devices_[d.local_device].context->port.device, s);
      fresh->Close(s);
      continue;
    }
    const uint64_t rate =
        PairRate(devices_[d.local_device].context->port.rate_mbps, theirs->rate_mbps);
    if (Install(d, std::move(fresh), rate)) joined.push_back(d.local_device);
  }
  return joined;
}

void StripedLink::CommitRejoin(const std::vector<uint32_t>& devices) {
  MutexLock rejoin(&rejoin_mu_);
  for (DevicePairLink& d : device_links_) {
    if (!d.paired || std::find(devices.begin(), devices.end(), d.remote_device) == devices.end()) {
      continue;
    }
    std::shared_ptr<VerbsLink> fresh;
    {
      MutexLock lock(&mu_);
      fresh = std::move(d.accepted);
    }
    if (fresh != nullptr) Install(d, std::move(fresh), d.accepted_rate);
  }
}

bool StripedLink::Install(DevicePairLink& d, std::shared_ptr<VerbsLink> fresh, uint64_t rate_mbps) {
  VerbsContext& device = *devices_[d.local_device].context;
  if (fresh->broken()) return false;  // its port went down again meanwhile
  d.rate_mbps = rate_mbps;
  const uint64_t weight = Weight(rate_mbps);
  for (uint32_t i = 0; i < stripes_.size(); ++i) {
    StripedWorker::Rejoining r{stripes_[i].get(),     d.slot, fresh,
                               &fresh->verbs_lane(i), weight, shared_from_this()};
    if (!pollers_[i]->HandOver(std::move(r))) {
      // Only with a poller's lane table full: the pair stays out.
      fresh->Close(absl::ResourceExhaustedError("too many lanes waiting to rejoin"));
      return false;
    }
  }
  Keep(&d.link, fresh);
  d.budget.Succeeded();
  device.rejoins.fetch_add(1, std::memory_order_relaxed);
  spdlog::info("link to {}: {} back in service ({} Mb/s, {} lanes)", peer().node_id,
               device.port.device, rate_mbps, stripes_.size());
  return true;
}

}  // namespace xferd::transport::verbs
