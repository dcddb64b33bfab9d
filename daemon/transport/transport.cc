#include "daemon/transport/transport.h"

namespace xferd::transport {

absl::string_view TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kTcp:
      return "tcp";
    case TransportKind::kVerbs:
      return "verbs";
  }
  return "?";
}

void PublishLanding(const Landing& landing) {
  const LandingNotice& n = landing.notice;
  memory::LandedEvent event{n.offset, n.length, *landing.source, n.transfer_id, 0, landing.time};
  event.blocks = n.blocks;
  event.bytes = n.bytes;
  landing.region->landed().Publish(event);
}

absl::Status Link::status() const {
  MutexLock lock(&mu_);
  return status_;
}

bool Link::MarkBroken(absl::Status reason) {
  MutexLock lock(&mu_);
  if (!status_.ok()) return false;
  status_ = reason.ok() ? absl::UnavailableError("link closed") : std::move(reason);
  broken_.store(true, std::memory_order_release);
  return true;
}

}  // namespace xferd::transport
