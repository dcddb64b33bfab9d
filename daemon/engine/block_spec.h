// The blocks of a many-block request as the client gave them (an explicit
// list, strided runs, or indices into prepared layouts), before planning. The
// service fills these from protobuf; the engine checks and expands them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xferd::engine {

// Blocks in one request at most: validation is all-or-nothing and planning
// holds the request's blocks at once (24 bytes each in flight).
inline constexpr uint64_t kMaxRequestBlocks = 4194304;

// count blocks of block_length bytes: block k copies src_start + k *
// src_stride to dst_start + k * dst_stride.
struct StridedRun {
  uint64_t src_start = 0;
  uint64_t dst_start = 0;
  uint64_t block_length = 0;
  uint64_t src_stride = 0;
  uint64_t dst_stride = 0;
  uint64_t count = 0;
};

// A prepared layout: equal blocks of one region, local (peer empty) or on a
// peer. Immutable once registered.
struct Layout {
  std::string name;
  std::string peer;  // empty: a local region
  std::string region;
  std::string owner;  // the tenant that prepared it: only its transfers use it
  uint64_t block_length = 0;
  std::vector<uint64_t> offsets;  // empty: count blocks at start + k * stride
  uint64_t start = 0;
  uint64_t stride = 0;
  uint64_t count = 0;

  uint64_t blocks() const { return offsets.empty() ? count : offsets.size(); }
  uint64_t offset(uint64_t index) const {
    return offsets.empty() ? start + index * stride : offsets[index];
  }
  // The first byte past the layout's highest block (for the size check).
  uint64_t extent() const;
};

struct BlockSpec {
  enum class Form : uint8_t { kRange, kList, kStrided, kLayout };
  Form form = Form::kRange;  // kRange: the request's offsets and length
  // kList: one entry per block; lengths empty means block_length each.
  std::vector<uint64_t> src_offsets;
  std::vector<uint64_t> dst_offsets;
  std::vector<uint64_t> lengths;
  uint64_t block_length = 0;
  // kStrided.
  std::vector<StridedRun> runs;
  // kLayout: names, indices, and the layouts the engine looked up.
  std::string src_layout;
  std::string dst_layout;
  std::vector<uint32_t> src_indices;
  std::vector<uint32_t> dst_indices;
  std::shared_ptr<const Layout> src_layout_ref;
  std::shared_ptr<const Layout> dst_layout_ref;

  // Blocks the request names (saturating; 1 for kRange).
  uint64_t count() const;
  // Array sizes, counts and limits, before any region is looked at
  // (layouts must be looked up already). INVALID_ARGUMENT says what is wrong.
  absl::Status CheckShape() const;
  // Appends `more` (same form) after this spec's blocks (SubmitStream).
  // INVALID_ARGUMENT if the forms or layouts differ.
  absl::Status Append(BlockSpec more);
};

// Validates a layout before registering it: name, block length, count,
// offsets vs start/stride/count. INVALID_ARGUMENT says what to fix.
absl::Status CheckLayoutShape(const Layout& layout);

}  // namespace xferd::engine
