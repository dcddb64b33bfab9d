#include "daemon/engine/landed_ranges.h"

#include <algorithm>
#include <cstdint>

#include "daemon/base/endian.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer.h"

namespace xferd::engine {
namespace {

// Bound on sending one write's ranges, within its own deadline.
constexpr absl::Duration kStageTimeout = absl::Seconds(10);

void AppendU64(std::string* out, uint64_t value) {
  uint8_t bytes[8];
  StoreLE<uint64_t>(bytes, value);
  out->append(reinterpret_cast<const char*>(bytes), 8);
}

}  // namespace

std::shared_ptr<memory::LandedRanges> PackRanges(absl::Span<const transport::Block> blocks,
                                                 bool remote) {
  auto offset = [remote](const transport::Block& b) {
    return remote ? b.remote_offset : b.local_offset;
  };
  auto before = [&](const transport::Block& x, const transport::Block& y) {
    return offset(x) < offset(y);
  };
  // Blocks in any order: by offset, so that blocks landing side by side are
  // one range whatever the order of the request. Plans of strided runs and
  // increasing layout indices come sorted and are not copied.
  std::vector<transport::Block> sorted;
  if (!std::is_sorted(blocks.begin(), blocks.end(), before)) {
    sorted.assign(blocks.begin(), blocks.end());
    std::sort(sorted.begin(), sorted.end(), before);
    blocks = sorted;
  }
  auto ranges = std::make_shared<memory::LandedRanges>();
  uint64_t start = 0, length = 0;
  for (const transport::Block& b : blocks) {
    if (length > 0 && start + length == offset(b)) {
      length += b.length;  // a piece planning cut at the slice size, or a neighbour
      continue;
    }
    if (length > 0) {
      AppendU64(&ranges->offsets, start);
      AppendU64(&ranges->lengths, length);
    }
    start = offset(b);
    length = b.length;
  }
  if (length > 0) {
    AppendU64(&ranges->offsets, start);
    AppendU64(&ranges->lengths, length);
  }
  return ranges;
}

std::vector<memory::LandedRanges> ChunkRanges(const memory::LandedRanges& ranges) {
  std::vector<memory::LandedRanges> chunks;
  const size_t bytes = 8 * kRangesPerChunk;
  for (size_t at = 0; at == 0 || at < ranges.offsets.size(); at += bytes) {
    chunks.push_back({ranges.offsets.substr(at, bytes), ranges.lengths.substr(at, bytes)});
  }
  return chunks;
}

void SendRanges(PeerRpc& rpc, const NodeIdentity& self, const Transfer& t) {
  if (IsTerminal(t.state())) return;  // cancelled or timed out meanwhile
  const Transfer::Plan& p = t.plan();
  const std::shared_ptr<memory::LandedRanges> ranges =
      PackRanges(t.planned_blocks(), /*remote=*/true);
  if (p.peer->is_self()) {  // into this daemon's own region: no message
    const absl::Status staged = p.remote_key->own_region->landed().Stage(
        self.node_id, t.id(), ranges->offsets, ranges->lengths, /*first=*/true);
    if (!staged.ok()) {
      spdlog::warn("transfer id={} ranges not staged on region '{}': {} (its landed event will "
                   "say ranges_missing)",
                   t.id(), p.spec.dst_region, staged.ToString());
    }
    return;
  }
  const absl::Time deadline = std::min(t.deadline(), absl::Now() + kStageTimeout);
  StagedRanges chunk;
  chunk.region_id = p.remote.region_id;
  chunk.region = p.spec.dst_region;
  chunk.transfer_id = t.id();
  for (memory::LandedRanges& piece : ChunkRanges(*ranges)) {
    chunk.offsets = std::move(piece.offsets);
    chunk.lengths = std::move(piece.lengths);
    const absl::Status sent = rpc.StageRanges(p.peer->node().address, self, chunk, deadline);
    if (!sent.ok()) {
      spdlog::warn(
          "transfer id={} ranges not sent to region '{}' on peer {}: {} (its landed event will "
          "say ranges_missing)",
          t.id(), p.spec.dst_region, p.peer->node_id(), sent.ToString());
      return;
    }
    chunk.first = false;
  }
}

}  // namespace xferd::engine
