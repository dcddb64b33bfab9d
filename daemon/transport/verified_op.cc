#include "daemon/transport/verified_op.h"

#include "daemon/memory/checksum.h"
#include "daemon/memory/region.h"

namespace xferd::transport {
namespace {

// False when a page of `region` is gone.
bool Checksum(const memory::Region* region, const iovec& piece, uint64_t* sum) {
  const auto* bytes = static_cast<const std::byte*>(piece.iov_base);
  if (region != nullptr) return memory::RegionChecksum(*region, bytes, piece.iov_len, sum);
  *sum = memory::BlockChecksum(bytes, piece.iov_len);
  return true;
}

// Block `b` landed `sum`, not what its source sent.
void RecordDifference(uint32_t b, uint64_t sum, ChecksumMismatch* mismatch) {
  if (mismatch->blocks++ == 0) {
    mismatch->first = b;
    mismatch->landed = sum;
  }
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
    if (!Checksum(region, landed[b], &sum) || sum != expected[b])
      RecordDifference(b, sum, mismatch);
  }
  return mismatch->blocks == 0;
}

bool MatchLanded(const uint64_t* landed, uint32_t count, const uint64_t* expected,
                 ChecksumMismatch* mismatch) {
  *mismatch = ChecksumMismatch{};
  for (uint32_t b = 0; b < count; ++b) {
    if (landed[b] != expected[b]) RecordDifference(b, landed[b], mismatch);
  }
  return mismatch->blocks == 0;
}

}  // namespace xferd::transport
