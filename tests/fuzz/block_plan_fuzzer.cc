// Fuzzes a client's many-block request: the bytes of a v1::Blocks (a packed
// list, strided runs or layout indices), converted by the service layer
// (FromProto), shape-checked (CheckShape) and planned against two regions
// (PlanBlocks), then grouped into ops (GroupOps). Validation is all or
// nothing; for a request it accepts, every planned block must lie inside
// both regions, be at most a slice, add up to the bytes asked for, and no
// two destination bytes may come from two blocks.
//
// Input: 24 header bytes (source and destination region sizes, slice, a
// layout's block length and block counts, direction), then the message.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/numeric/int128.h"
#include "daemon/engine/block_plan.h"
#include "daemon/engine/block_spec.h"
#include "daemon/service/blocks_convert.h"
#include "tests/fuzz/fuzz_check.h"
#include "xferd/v1/xferd.pb.h"

namespace {

using xferd::engine::Layout;
using xferd::transport::Block;

struct Header {
  uint64_t src_size;
  uint64_t dst_size;
  uint32_t slice;
  uint16_t layout_block;  // KiB-ish units, see below
  uint8_t src_layout_count;
  uint8_t flags;  // bit 0: a write (source local)
};
static_assert(sizeof(Header) == 24);

// Requests above this many blocks are valid but slow to plan per input.
constexpr uint64_t kMaxFuzzBlocks = 1 << 16;
// Likewise plans above this many pieces: up to kMaxPlannedBlocks (4 Mi
// pieces, 100 MB) they are accepted, and one such input took 4 s alone under
// the fuzz build's sanitizers, past libFuzzer's 10 s hang timeout on a busy
// host. Bytes that cannot fit kMaxPlannedBlocks pieces still reach the
// refusal, which is found before anything is allocated.
constexpr uint64_t kMaxFuzzPieces = 1 << 17;

std::shared_ptr<const Layout> StridedLayout(const char* region, uint64_t block, uint64_t count) {
  auto layout = std::make_shared<Layout>();
  layout->name = region;
  layout->region = region;
  layout->block_length = block;
  layout->stride = block;
  layout->count = count;
  return layout;
}

// The bytes `spec` asks for, without overflow (a refused request's may
// exceed 2^64).
absl::uint128 AskedBytes(const xferd::engine::BlockSpec& spec) {
  using Form = xferd::engine::BlockSpec::Form;
  absl::uint128 asked = 0;
  switch (spec.form) {
    case Form::kList:
      for (size_t i = 0; i < spec.src_offsets.size(); ++i) {
        asked += spec.lengths.empty() ? spec.block_length : spec.lengths[i];
      }
      break;
    case Form::kStrided:
      for (const xferd::engine::StridedRun& r : spec.runs) {
        asked += absl::uint128(r.block_length) * r.count;
      }
      break;
    case Form::kLayout:
      asked = absl::uint128(spec.src_layout_ref->block_length) * spec.src_indices.size();
      break;
    case Form::kRange:
      FUZZ_CHECK(false);  // FromProto never makes a range
  }
  return asked;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd;
  if (size < sizeof(Header)) return 0;
  Header h;
  std::memcpy(&h, data, sizeof(h));
  v1::Blocks message;
  if (!message.ParseFromArray(data + sizeof(h), static_cast<int>(size - sizeof(h)))) return 0;
  absl::StatusOr<engine::BlockSpec> spec = service::FromProto(message);
  if (!spec.ok()) return 0;
  // Region sizes up to 1 TiB: offsets near 2^64 still come from the message,
  // and a whole-region block at a 4 KiB slice meets kMaxPlannedBlocks.
  const uint64_t src_size = h.src_size % (uint64_t{1} << 40);
  const uint64_t dst_size = h.dst_size % (uint64_t{1} << 40);
  const uint32_t slice = 4096u << (h.slice % 13);  // 4 KiB .. 16 MiB, as the engine allows
  if (spec->form == engine::BlockSpec::Form::kLayout) {
    const uint64_t block = uint64_t{h.layout_block} + 1;
    spec->src_layout_ref = StridedLayout("src", block, uint64_t{h.src_layout_count} + 1);
    spec->dst_layout_ref = StridedLayout("dst", block, src_size / block + 1);
  }
  if (!spec->CheckShape().ok() || spec->count() > kMaxFuzzBlocks) return 0;
  const absl::uint128 asked = AskedBytes(*spec);
  const absl::uint128 min_pieces = asked / slice;  // a piece is at most a slice
  if (min_pieces > kMaxFuzzPieces && min_pieces <= engine::kMaxPlannedBlocks) return 0;
  const engine::RegionSide src{"src", "", src_size};
  const engine::RegionSide dst{"dst", "b", dst_size};
  const bool src_is_local = (h.flags & 1) != 0;
  absl::StatusOr<std::vector<Block>> blocks =
      engine::PlanBlocks(*spec, src, dst, src_is_local, slice);
  if (!blocks.ok()) return 0;

  const uint64_t local_size = src_is_local ? src_size : dst_size;
  const uint64_t remote_size = src_is_local ? dst_size : src_size;
  uint64_t planned = 0;
  std::vector<std::pair<uint64_t, uint64_t>> written;  // destination [start, end)
  for (const Block& b : *blocks) {
    FUZZ_CHECK(b.length > 0 && b.length <= slice);
    FUZZ_CHECK(b.local_offset <= local_size && b.length <= local_size - b.local_offset);
    FUZZ_CHECK(b.remote_offset <= remote_size && b.length <= remote_size - b.remote_offset);
    const uint64_t to = src_is_local ? b.remote_offset : b.local_offset;
    written.emplace_back(to, to + b.length);
    planned += b.length;
  }
  std::sort(written.begin(), written.end());
  for (size_t i = 1; i < written.size(); ++i) FUZZ_CHECK(written[i - 1].second <= written[i].first);
  // The planned bytes are the bytes asked for (merging and cutting keep them).
  FUZZ_CHECK(planned == asked);

  const std::vector<uint32_t> starts = engine::GroupOps(*blocks, slice);
  FUZZ_CHECK(!starts.empty() && starts.front() == 0 && starts.back() == blocks->size());
  for (size_t op = 0; op + 1 < starts.size(); ++op) {
    FUZZ_CHECK(starts[op] < starts[op + 1]);
    FUZZ_CHECK(starts[op + 1] - starts[op] <= transport::kMaxBlocksPerOp);
    uint64_t bytes = 0;
    for (uint32_t i = starts[op]; i < starts[op + 1]; ++i) bytes += (*blocks)[i].length;
    FUZZ_CHECK(bytes <= slice);
  }
  return 0;
}
