#include "daemon/transport/transport.h"

#include "daemon/memory/checksum.h"

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

bool CheckLanded(const memory::Region* region, const iovec* landed, uint32_t count,
                 const uint64_t* expected, ChecksumMismatch* mismatch) {
  *mismatch = ChecksumMismatch{};
  for (uint32_t b = 0; b < count; ++b) {
    const auto* bytes = static_cast<const std::byte*>(landed[b].iov_base);
    uint64_t sum = 0;
    bool read = true;
    if (region != nullptr) {
      read = memory::RegionChecksum(*region, bytes, landed[b].iov_len, &sum);
    } else {
      sum = memory::BlockChecksum(bytes, landed[b].iov_len);
    }
    if (read && sum == expected[b]) continue;
    if (mismatch->blocks++ == 0) {
      mismatch->first = b;
      mismatch->landed = sum;
    }
  }
  return mismatch->blocks == 0;
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
