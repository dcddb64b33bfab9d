// The ranges a many-block transfer lands in, for regions registered with
// landed_ranges (docs/many-blocks.md): packed from a transfer's planned
// blocks by destination offset, blocks side by side joined, and sent to the
// peer's region in chunks that fit a StageRanges message.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/engine/transfer.h"
#include "daemon/memory/landed_events.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

// Ranges per StageRanges message: 16 bytes each, 1 MiB a message, well
// under the peer server's 16 MiB limit.
inline constexpr size_t kRangesPerChunk = 65536;

// The blocks' ranges on the local side (`remote` false: a read's
// destination) or the remote side (a write's destination), by offset, those
// side by side merged (the request's order does not matter: blocks covering
// a region in random order are one range), as packed little-endian uint64
// arrays. Destinations never overlap (planning refuses it). Unsorted blocks
// are copied and sorted (24 bytes a block while it runs). Any thread.
std::shared_ptr<memory::LandedRanges> PackRanges(absl::Span<const transport::Block> blocks,
                                                 bool remote);

// `ranges` cut into pieces of at most kRangesPerChunk ranges (at least one).
std::vector<memory::LandedRanges> ChunkRanges(const memory::LandedRanges& ranges);

// Sends write `t`'s destination ranges to its peer's region (StageRanges),
// within its deadline, unless it has already ended. Blocks: the control
// executor only, before the transfer's ops are posted. A failure is logged,
// not returned: the write runs anyway and its landed event says
// ranges_missing. A write to the self peer stages them on its own region.
void SendRanges(PeerRpc& rpc, const NodeIdentity& self, const Transfer& t);

}  // namespace xferd::engine
