// Turns the blocks of a request into what the pollers post: every block
// checked (all or nothing, errors name the block), adjacent blocks merged when
// contiguous on both sides, cut to at most a slice, then grouped into ops of
// at most one slice and kMaxBlocksPerOp blocks. Pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "daemon/engine/block_spec.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

// One side of a transfer, as errors name it.
struct RegionSide {
  std::string name;
  std::string peer;  // empty: a local region
  uint64_t size = 0;
};

// Checks and expands a many-block spec (not kRange). src/dst are the
// request's sides; `src_is_local` for a write, false for a read; `merge`
// joins blocks contiguous on both sides (a verified transfer keeps them
// apart: it has a checksum per request block). Errors:
// INVALID_ARGUMENT (zero length, bad layout index, overlapping destination
// blocks, naming both) and OUT_OF_RANGE (a block outside its region), each
// naming the request's block number.
absl::StatusOr<std::vector<transport::Block>> PlanBlocks(const BlockSpec& spec,
                                                         const RegionSide& src,
                                                         const RegionSide& dst, bool src_is_local,
                                                         uint32_t slice, bool merge = true);

// The most pieces (24 bytes each) one transfer is planned as: the largest
// request's block count. Without it a range of a huge region at a small
// slice would make the daemon allocate gigabytes (1 TiB at 4 KiB: 6 GiB).
inline constexpr uint64_t kMaxPlannedBlocks = kMaxRequestBlocks;

// Appends `length` bytes from `local` (local region) and `remote` (the
// peer's) as blocks of at most `slice` bytes (> 0). INVALID_ARGUMENT, and
// nothing appended, when `out` would exceed kMaxPlannedBlocks; `what` names
// the bytes in the message ("block #7", "the range").
absl::Status AppendSplit(uint64_t local, uint64_t remote, uint64_t length, uint32_t slice,
                         std::vector<transport::Block>* out, absl::string_view what);

// Groups blocks, in order, into ops: each op takes blocks while it stays
// within `slice` bytes and kMaxBlocksPerOp blocks (every block is <= slice).
// Returns ops + 1 starts: op i is blocks [starts[i], starts[i + 1]).
std::vector<uint32_t> GroupOps(absl::Span<const transport::Block> blocks, uint32_t slice);

}  // namespace xferd::engine
