#include "daemon/transport/link_set.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xferd::transport {

void LinkSet::Add(const std::shared_ptr<Link>& link) {
  MutexLock lock(&mu_);
  links_.erase(std::remove_if(links_.begin(), links_.end(),
                              [](const std::weak_ptr<Link>& l) { return l.expired(); }),
               links_.end());
  links_.push_back(link);
}

void LinkSet::CloseAll(const absl::Status& reason) {
  std::vector<std::shared_ptr<Link>> live;
  {
    MutexLock lock(&mu_);
    for (const auto& weak : links_) {
      if (auto link = weak.lock()) live.push_back(std::move(link));
    }
  }
  // Outside the lock: Close hands lanes to their pollers and logs, and a
  // link's last reference may go here.
  for (auto& link : live) link->Close(reason);
}

absl::StatusOr<uint32_t> AcceptedLanes(TransportKind local, uint32_t local_lanes,
                                       const PeerIdentity& peer, const LinkEndpoints& remote) {
  if (remote.kind != local) {
    return absl::FailedPreconditionError(
        absl::StrCat("peer ", peer.node_id, " uses the ", TransportKindName(remote.kind),
                     " transport but this daemon uses ", TransportKindName(local),
                     ": configure the same transport on both"));
  }
  if (remote.lanes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer ", peer.node_id, " offered 0 data lanes; a daemon offers one per poller"));
  }
  return std::min(local_lanes, remote.lanes);
}

}  // namespace xferd::transport
