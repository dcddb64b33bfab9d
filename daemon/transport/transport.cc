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

namespace {

// False when a page of `region` is gone.
bool Checksum(const memory::Region* region, const iovec& piece, uint64_t* sum) {
  const auto* bytes = static_cast<const std::byte*>(piece.iov_base);
  if (region != nullptr) return memory::RegionChecksum(*region, bytes, piece.iov_len, sum);
  *sum = memory::BlockChecksum(bytes, piece.iov_len);
  return true;
}

}  // namespace

void TakeChecksums(const memory::Region* region, const iovec* pieces, uint32_t count,
                   uint64_t* sums) {
  for (uint32_t b = 0; b < count; ++b) {
    if (!Checksum(region, pieces[b], &sums[b])) sums[b] = 0;
  }
}

bool CheckLanded(const memory::Region* region, const iovec* landed, uint32_t count,
                 const uint64_t* expected, ChecksumMismatch* mismatch) {
  *mismatch = ChecksumMismatch{};
  for (uint32_t b = 0; b < count; ++b) {
    uint64_t sum = 0;
    if (Checksum(region, landed[b], &sum) && sum == expected[b]) continue;
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
