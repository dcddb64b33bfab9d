// Turns the blocks of a request into what the pollers post: every block
// checked (all or nothing, errors name the block), adjacent blocks merged when
// contiguous on both sides, cut to at most a slice, then grouped into ops of
// at most one slice and kMaxBlocksPerOp blocks. Pure functions, any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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
// request's sides; `src_is_local` for a write, false for a read. Errors:
// INVALID_ARGUMENT (zero length, bad layout index, overlapping destination
// blocks, naming both) and OUT_OF_RANGE (a block outside its region), each
// naming the request's block number.
absl::StatusOr<std::vector<transport::Block>> PlanBlocks(const BlockSpec& spec,
                                                         const RegionSide& src,
                                                         const RegionSide& dst, bool src_is_local,
                                                         uint32_t slice);

// Appends `length` bytes from `local` (local region) and `remote` (the
// peer's) as blocks of at most `slice` bytes. `slice` > 0.
void AppendSplit(uint64_t local, uint64_t remote, uint64_t length, uint32_t slice,
                 std::vector<transport::Block>* out);

// Groups blocks, in order, into ops: each op takes blocks while it stays
// within `slice` bytes and kMaxBlocksPerOp blocks (every block is <= slice).
// Returns ops + 1 starts: op i is blocks [starts[i], starts[i + 1]).
std::vector<uint32_t> GroupOps(absl::Span<const transport::Block> blocks, uint32_t slice);

}  // namespace xferd::engine
