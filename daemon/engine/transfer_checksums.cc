#include "daemon/engine/transfer_checksums.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace xferd::engine {
namespace {

// "block #7 (source offset 28672, destination offset 4096, 4096 bytes)".
std::string DescribeBlock(uint64_t index, const transport::Block& b, bool read) {
  return absl::StrCat("block #", index, " (source offset ", read ? b.remote_offset : b.local_offset,
                      ", destination offset ", read ? b.local_offset : b.remote_offset, ", ",
                      b.length, " bytes)");
}

std::string Crc(uint64_t sum) { return absl::StrCat("0x", absl::Hex(sum, absl::kZeroPad16)); }

}  // namespace

void TransferChecksums::RecordMismatch(const transport::ChecksumMismatch& mismatch) {
  const uint64_t block = static_cast<uint64_t>(mismatch.checksums - data()) + mismatch.first;
  {
    MutexLock lock(&mu_);
    if (block < first_differing_) {
      first_differing_ = block;
      first_landed_ = mismatch.landed;
    }
  }
  differing_.fetch_add(mismatch.blocks, std::memory_order_release);
}

absl::Status TransferChecksums::MismatchError(absl::Span<const transport::Block> blocks,
                                              bool read) const {
  uint64_t first;
  uint64_t landed;
  {
    MutexLock lock(&mu_);
    first = first_differing_;
    landed = first_landed_;
  }
  return absl::DataLossError(absl::StrCat(
      "verify: ", DescribeBlock(first, blocks[first], read), " landed with CRC-64 ", Crc(landed),
      " where the source sent ", Crc((*sums_)[first]), "; ",
      differing_.load(std::memory_order_acquire), " of ", blocks.size(),
      " blocks differ. The destination does not hold what was sent (changed while in flight, or "
      "corrupted on the way): ",
      read ? "" : "no landed event was raised; ", "retry the transfer"));
}

absl::Status TransferChecksums::ExpectedError(absl::Span<const transport::Block> blocks,
                                              const std::vector<uint64_t>& expected) const {
  const std::vector<uint64_t>& sums = *sums_;
  uint64_t differ = 0;
  uint64_t first = 0;
  for (uint64_t i = 0; i < blocks.size(); ++i) {
    if (sums[i] != expected[i] && differ++ == 0) first = i;
  }
  if (differ == 0) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat(
      "verify: ", DescribeBlock(first, blocks[first], /*read=*/true), " has CRC-64 ",
      Crc(sums[first]), " and expected_checksums[", first, "] is ", Crc(expected[first]), "; ",
      differ, " of ", blocks.size(),
      " blocks differ from expected_checksums: the source no longer holds the data they were "
      "taken of"));
}

}  // namespace xferd::engine
