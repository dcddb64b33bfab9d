// Link bookkeeping every transport shares: the links it has made, held weakly
// so that it can close them all (at shutdown, or when its device dies)
// without keeping any alive, and the check of a peer's link offer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/transport.h"

namespace xferd::transport {

class LinkSet {
 public:
  // Any thread: remembers `link` until it is destroyed (and forgets those
  // already gone, so the set stays as large as the live links).
  void Add(const std::shared_ptr<Link>& link);

  // Any thread: closes every link still alive with `reason` (Link::Close:
  // idempotent, the first reason wins). Links added meanwhile stay open.
  void CloseAll(const absl::Status& reason);

 private:
  Mutex mu_;
  std::vector<std::weak_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);
};

// Responder side of a handshake: the lanes of the link to accept from `peer`,
// the smaller of `local_lanes` and the lanes it offers. FAILED_PRECONDITION
// when it uses another transport than `local`, INVALID_ARGUMENT when it
// offers no lane.
absl::StatusOr<uint32_t> AcceptedLanes(TransportKind local, uint32_t local_lanes,
                                       const PeerIdentity& peer, const LinkEndpoints& remote);

}  // namespace xferd::transport
