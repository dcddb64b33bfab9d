#include "daemon/engine/peer_verify.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer.h"
#include "daemon/memory/checksum.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {
namespace {

// How long a peer may take over one chunk's checksums (a quarter of a
// second's work at memory speed, far more on a loaded host).
constexpr absl::Duration kChecksumTimeout = absl::Seconds(30);

template <typename T>
void Append(std::string* packed, T value) {
  uint8_t bytes[sizeof(T)];
  StoreLE(bytes, value);
  packed->append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

template <typename T>
T At(const std::string& packed, size_t i) {
  return LoadLE<T>(reinterpret_cast<const uint8_t*>(packed.data()) + i * sizeof(T));
}

// The end of the chunk of `blocks` starting at `first`: at most
// kChecksumBlocksPerCall blocks and kChecksumBytesPerCall bytes (at least one
// block).
size_t ChunkEnd(absl::Span<const transport::Block> blocks, size_t first) {
  size_t end = first;
  uint64_t bytes = 0;
  while (end < blocks.size() && end - first < kChecksumBlocksPerCall &&
         (end == first || bytes + blocks[end].length <= kChecksumBytesPerCall)) {
    bytes += blocks[end++].length;
  }
  return end;
}

}  // namespace

void VerifyAtPeer(PeerRpc& rpc, const NodeIdentity& self, Transfer& t) {
  if (IsTerminal(t.state())) return;  // cancelled or timed out meanwhile
  const Transfer::Plan& p = t.plan();
  const bool write = p.kind == transport::OpKind::kWrite;
  const absl::Span<const transport::Block> blocks = t.planned_blocks();
  uint64_t* sums = t.checksums()->data();
  for (size_t first = 0; first < blocks.size();) {
    const size_t end = ChunkEnd(blocks, first);
    ChecksumQuery query;
    query.region_id = p.remote.region_id;
    query.region = RemoteRegionName(p.spec);
    for (size_t i = first; i < end; ++i) {
      Append<uint64_t>(&query.offsets, blocks[i].remote_offset);
      Append<uint32_t>(&query.lengths, blocks[i].length);
      if (write) Append<uint64_t>(&query.expected, sums[i]);
    }
    // The landing goes with the last chunk, and only if none differed yet.
    if (write && end == blocks.size() && !t.corrupt()) query.notice = t.notice();
    const absl::Time deadline = std::min(t.deadline(), absl::Now() + kChecksumTimeout);
    absl::StatusOr<std::string> theirs =
        rpc.ChecksumBlocks(p.peer->node().address, self, query, deadline);
    if (!theirs.ok()) {
      t.Finish(TransferState::kFailed,
               absl::Status(theirs.status().code(),
                            absl::StrCat("verify: peer '", p.peer->node_id(),
                                         "' could not checksum its side of the transfer: ",
                                         theirs.status().message())));
      return;
    }
    if (theirs->size() != (end - first) * sizeof(uint64_t)) {
      t.Finish(TransferState::kFailed,
               absl::UnavailableError(absl::StrCat("verify: peer '", p.peer->node_id(),
                                                   "' answered ", theirs->size() / 8,
                                                   " checksums for ", end - first, " blocks")));
      return;
    }
    // A write's destination against the sums sent; a read's landed bytes
    // here against the source's, which become the transfer's.
    transport::ChecksumMismatch mismatch{sums + first};
    for (size_t i = first; i < end; ++i) {
      const uint64_t their = At<uint64_t>(*theirs, i - first);
      uint64_t landed = their;
      if (!write) {
        const transport::Block& b = blocks[i];
        if (!memory::RegionChecksum(*p.local, p.local->data() + b.local_offset, b.length,
                                    &landed)) {
          t.Finish(TransferState::kFailed, p.local->MarkLost());
          return;
        }
        sums[i] = their;
      }
      if (landed == sums[i]) continue;
      if (mismatch.blocks++ == 0) {
        mismatch.first = static_cast<uint32_t>(i - first);
        mismatch.landed = landed;
      }
    }
    if (mismatch.blocks > 0) t.checksums()->RecordMismatch(mismatch);
    first = end;
  }
  t.FinishVerified();
}

absl::StatusOr<std::string> ChecksumForPeer(const std::shared_ptr<memory::Region>& region,
                                            const ChecksumQuery& query, const std::string& source) {
  const size_t n = query.offsets.size() / sizeof(uint64_t);
  if (query.offsets.size() % sizeof(uint64_t) != 0 || n == 0 || n > kChecksumBlocksPerCall ||
      query.lengths.size() != n * sizeof(uint32_t) ||
      (!query.expected.empty() && query.expected.size() != n * sizeof(uint64_t))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checksum request of ", query.offsets.size(), " offset, ", query.lengths.size(),
        " length and ", query.expected.size(), " checksum bytes: expected 1..",
        kChecksumBlocksPerCall, " blocks of 8, 4 and 8 (or no checksums) bytes each"));
  }
  if (query.notice.has_value() && query.expected.empty()) {
    return absl::InvalidArgumentError("a landing notice comes with the checksums to compare");
  }
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t offset = At<uint64_t>(query.offsets, i);
    const uint32_t length = At<uint32_t>(query.lengths, i);
    RETURN_IF_ERROR(region->CheckRange(offset, length, "checksummed"));
    bytes += length;
  }
  if (bytes > kChecksumBytesPerCall && n > 1) {
    return absl::InvalidArgumentError(absl::StrCat("checksum request of ", bytes,
                                                   " bytes: at most ", kChecksumBytesPerCall,
                                                   " a call (or one block)"));
  }
  std::string out;
  out.reserve(n * sizeof(uint64_t));
  bool all_match = true;
  for (size_t i = 0; i < n; ++i) {
    uint64_t sum = 0;
    if (!memory::RegionChecksum(*region, region->data() + At<uint64_t>(query.offsets, i),
                                At<uint32_t>(query.lengths, i), &sum)) {
      return region->MarkLost();
    }
    Append<uint64_t>(&out, sum);
    if (!query.expected.empty() && sum != At<uint64_t>(query.expected, i)) all_match = false;
  }
  if (query.notice.has_value() && all_match &&
      region->CheckRange(query.notice->offset, query.notice->length, "landed").ok()) {
    transport::PublishLanding(transport::Landing{
        region, std::make_shared<const std::string>(source), *query.notice, absl::Now()});
  }
  return out;
}

}  // namespace xferd::engine
