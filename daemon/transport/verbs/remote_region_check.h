// The verbs transport's validation of a peer's region keys (ResolveRegion),
// free of libibverbs so it can be unit-tested and fuzzed without a device.
// The keys come from a peer: the datapath indexes a lane's keys by
// offset / mr_chunk_bytes for every offset below size, so this check is what
// keeps that index in bounds.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::verbs {

// Smallest memory-registration chunk: at least the largest slice, so a
// slice crosses at most one chunk boundary per side (see kMaxWrsPerOp).
inline constexpr uint64_t kMinMrChunk = kMaxSliceBytes;

// Lanes a link may have at most, as far as per-lane keys go (the service
// refuses handshakes with more).
inline constexpr uint32_t kMaxKeyLanes = 256;

// OK if `region` is well formed for a link of `lanes` lanes: a non-zero
// address and size that do not wrap around the address space, a chunk size
// of at least kMinMrChunk (or covering the whole region), and exactly one
// rkey per chunk on every device, or, with per-lane keys (key_lanes, at
// least `lanes`), one per lane and chunk on each device that has keys.
// INVALID_ARGUMENT otherwise. Any thread; pure.
absl::Status CheckRemoteRegionKeys(const RemoteRegion& region, uint32_t lanes);

}  // namespace xferd::transport::verbs
