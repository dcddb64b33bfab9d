// The verification state of one verified transfer (docs/integrity.md): one
// checksum per planned block, of the source's bytes, and what the
// destination found, the blocks that landed other bytes. Pollers fill it
// in and record into it as ops complete (each op its own blocks' entries);
// the transfer's end reads it once every op is in.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

class TransferChecksums {
 public:
  explicit TransferChecksums(size_t blocks)
      : sums_(std::make_shared<std::vector<uint64_t>>(blocks)) {}

  // One per block: a write's source checksums, a read's (the transport's,
  // or the peer's check's).
  uint64_t* data() { return sums_->data(); }
  // What a done transfer reports (TransferInfo::checksums).
  const std::shared_ptr<std::vector<uint64_t>>& shared() const { return sums_; }

  // Some blocks of one op (its DataOp::checksums point into data()) landed
  // other bytes. Rare: takes a lock.
  void RecordMismatch(const transport::ChecksumMismatch& mismatch);
  bool corrupt() const { return differing_.load(std::memory_order_acquire) > 0; }
  // DATA_LOSS naming the first block of `blocks` (the transfer's planned
  // ones) that landed other bytes, and how many did.
  absl::Status MismatchError(absl::Span<const transport::Block> blocks, bool read) const;
  // DATA_LOSS naming the first block whose checksum is not its entry in
  // `expected` (a read's expected_checksums), and how many; OK if none.
  absl::Status ExpectedError(absl::Span<const transport::Block> blocks,
                             const std::vector<uint64_t>& expected) const;

 private:
  const std::shared_ptr<std::vector<uint64_t>> sums_;
  std::atomic<uint64_t> differing_{0};
  mutable Mutex mu_;
  uint64_t first_differing_ ABSL_GUARDED_BY(mu_) = UINT64_MAX;
  uint64_t first_landed_ ABSL_GUARDED_BY(mu_) = 0;  // its landed bytes' checksum
};

}  // namespace xferd::engine
