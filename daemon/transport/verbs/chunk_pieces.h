// How a block is cut into work requests: a request must sit inside one
// memory-registration chunk on both sides (one lkey, one rkey). Free of
// libibverbs, so the cut is unit-tested without a device; the lane walks it
// both to count an op's requests and to build them, so the two never differ.
#pragma once

#include <algorithm>
#include <cstdint>

namespace xferd::transport::verbs {

// Calls fn(local_offset, remote_offset, length) for each piece of the block
// of `length` bytes at `local_offset` / `remote_offset`, in order: cut at
// every multiple of `local_chunk` on the local side and of `remote_chunk` on
// the remote side (a cut at the same byte on both sides is one cut). Chunk
// sizes must be non-zero. Any thread; pure.
template <typename Fn>
inline void ForEachPiece(uint64_t local_offset, uint64_t local_chunk, uint64_t remote_offset,
                         uint64_t remote_chunk, uint32_t length, Fn&& fn) {
  while (length > 0) {
    uint64_t n = std::min<uint64_t>(length, local_chunk - local_offset % local_chunk);
    n = std::min<uint64_t>(n, remote_chunk - remote_offset % remote_chunk);
    fn(local_offset, remote_offset, static_cast<uint32_t>(n));
    local_offset += n;
    remote_offset += n;
    length -= static_cast<uint32_t>(n);
  }
}

// The number of pieces ForEachPiece makes of that block (0 for an empty one).
inline uint32_t CountPieces(uint64_t local_offset, uint64_t local_chunk, uint64_t remote_offset,
                            uint64_t remote_chunk, uint32_t length) {
  uint32_t pieces = 0;
  ForEachPiece(local_offset, local_chunk, remote_offset, remote_chunk, length,
               [&pieces](uint64_t, uint64_t, uint32_t) { ++pieces; });
  return pieces;
}

}  // namespace xferd::transport::verbs
