// The narrower, verbs-side interface of a link whose device pairs can come
// back one by one (Link::rejoin()); the TCP transport has none.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport {

// Rejoin: a broken share of a live link back in service. Verbs over several
// devices: a device pair whose port went down or whose queue pair failed
// comes back without a new handshake (transfers in flight keep going), in the
// steps of CreateLink / AcceptLink / Connect, which the engine carries over
// the peer service. Control threads.
class LinkRejoin {
 public:
  virtual ~LinkRejoin() = default;
  // Initiator: fresh queue pairs for each broken pair whose local port is up
  // and whose retries are not spent (RejoinBudget); false if there is none.
  virtual bool OfferRejoin(LinkEndpoints* offer) = 0;
  // Responder: connects fresh queue pairs to the offered ones it can take
  // (its device up; `keep_own`: not those it is offering itself, the
  // tie-break when both ends offer at once), closes its old side of each,
  // and answers with them. They carry nothing until CommitRejoin.
  virtual absl::Status AcceptRejoin(const LinkEndpoints& offer, bool keep_own,
                                    LinkEndpoints* answer) = 0;
  // Initiator: connects the offered pairs the answer took, puts them in
  // service, drops the rest of the offer (an empty answer drops it all).
  // Returns the local devices now back, for CommitRejoin.
  virtual std::vector<uint32_t> ConnectRejoin(const LinkEndpoints& answer) = 0;
  // Responder: puts its side of the pairs with the peer's `devices` in service.
  virtual void CommitRejoin(const std::vector<uint32_t>& devices) = 0;
};

}  // namespace xferd::transport
