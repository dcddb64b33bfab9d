// Turns the blocks of a request into what the pollers post: blocks no longer
// than a slice, adjacent ones merged, grouped into ops of at most one slice
// and kMaxBlocksPerOp blocks. Pure functions on plain arrays, any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

// Appends `length` bytes from `local` (local region) and `remote` (the
// peer's) as blocks of at most `slice` bytes. `slice` > 0.
void AppendSplit(uint64_t local, uint64_t remote, uint64_t length, uint32_t slice,
                 std::vector<transport::Block>* out);

// Groups blocks, in order, into ops: each op takes blocks while it stays
// within `slice` bytes and kMaxBlocksPerOp blocks (every block is <= slice).
// Returns ops + 1 starts: op i is blocks [starts[i], starts[i + 1]).
std::vector<uint32_t> GroupOps(absl::Span<const transport::Block> blocks, uint32_t slice);

}  // namespace xferd::engine
