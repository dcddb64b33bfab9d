// Turns fuzz input into what a peer sends on a TCP data connection, frame by
// frame, so the fuzzer reaches the read path (READ_RESP into our blocks,
// READ_REQ against regions with and without remote_read) with well-formed
// headers and sequence numbers most of the time, and near misses the rest.
// Each command takes its fields from the input; an exhausted input reads 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace xferd::fuzz {

// The byte a well-formed READ_RESP carries at `index` of its payload for
// our frame `seq`: the reader's blocks must hold these after an OK read.
inline uint8_t ReadRespByte(uint64_t seq, size_t index) {
  return static_cast<uint8_t>(seq * 131 + index * 7 + 1);
}

// One WRITE or READ_REQ of the peer, by its sequence number.
struct PeerRequest {
  // A READ_REQ the lane must serve: the readable region, every block in it,
  // the frame's length their sum.
  bool servable_read = false;
  std::vector<std::pair<uint64_t, uint32_t>> blocks;  // offset, length
};

struct PeerScript {
  std::vector<uint8_t> bytes;  // the peer's stream
  bool raw = false;            // some bytes were copied verbatim from the input
  // requests[s - 1]: the peer's frame of sequence number s, while the
  // script kept them in sequence (a near miss there ends the list).
  std::vector<PeerRequest> requests;
};

// `own_lengths[i]` is the payload of our frame i + 1 (a WRITE's bytes sent or
// a READ's bytes asked for), so answers can be right or near misses.
PeerScript BuildPeerScript(const uint8_t* data, size_t size,
                           const std::vector<uint32_t>& own_lengths);

}  // namespace xferd::fuzz
