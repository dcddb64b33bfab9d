// What a TCP lane (tcp_lane.h) keeps to send: its frames in flight, its
// answers to the peer's frames, the builder that gathers their pieces into
// one sendmsg, and which end reads SUMS frames.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "daemon/memory/region.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::tcp {

inline constexpr uint32_t kTcpNoZeros = UINT32_MAX;  // zeros_from: no zeros

// What follows the header of a frame or answer we send: its payload,
// straight from region memory; a verdict if that memory can fault; then, if
// verified, the payload's checksum table.
struct TcpPayload {
  uint32_t count = 0;   // pieces
  uint32_t length = 0;  // their bytes
  iovec pieces[kMaxBlocksPerOp];
  // Memory that can fault: a verdict of trailer_len bytes follows the
  // pieces. Bytes from zeros_from on are zeros once the memory faulted
  // there.
  bool guarded = false;
  uint32_t trailer_len = 0;
  uint32_t zeros_from = kTcpNoZeros;
  // Verified: each piece's checksum, taken as the socket takes its bytes
  // (`running`); the table (checksums_len bytes) is filled once they all
  // went, and is held back until then (`checksums_due`), unless it goes in
  // a SUMS frame of its own (`table_later`, a READ_RESP's).
  bool checksums_due = false;
  bool table_later = false;
  uint32_t checksums_len = 0;
  uint32_t summed = 0;  // payload bytes in `running`
  uint64_t running[kMaxBlocksPerOp];
  uint8_t checksums[kMaxChecksumTableBytes];

  // Empty, to be filled from memory that can fault or not.
  void Reset(bool can_fault) {
    count = length = 0;
    guarded = can_fault;
    trailer_len = can_fault ? kVerdictBytes : 0;
    zeros_from = kTcpNoZeros;
    checksums_due = false;
    table_later = false;
    checksums_len = 0;
  }
  void Add(std::byte* data, uint32_t len) {
    pieces[count++] = {data, len};
    length += len;
  }
  // Once every piece is in: verified, its table follows the verdict, or
  // goes later in a frame of its own.
  void Verify(bool later) {
    checksums_due = true;
    table_later = later;
    checksums_len = later ? 0 : count * kChecksumBytes;
    summed = 0;
    std::fill_n(running, count, 0);
  }
  size_t wire_bytes() const { return size_t{length} + trailer_len + checksums_len; }
};

// One of our frames: header, notice and block table, then (WRITE) its
// payload. A READ's payload comes back into the same blocks.
struct TcpTxSlot {
  uint64_t cookie = 0;
  OpKind kind = OpKind::kWrite;
  uint32_t payload_len = 0;  // WRITE: bytes sent; READ: bytes asked for
  uint32_t header_len = 0;
  std::byte* local_base = nullptr;
  const Block* blocks = nullptr;
  uint32_t block_count = 0;
  memory::Region* region = nullptr;  // the local region (DataOp::local_region)
  uint64_t* checksums = nullptr;     // DataOp::checksums (verified frames)
  TcpPayload payload;                // WRITE only
  absl::Status fault;                // the memory faulted under the payload: the op's end
  // A verified READ whose answer came with its table to follow: the
  // checksums of what landed, or why it could not land.
  uint64_t landed[kMaxBlocksPerOp];
  absl::Status read_error;
  uint8_t header[kHeaderBytes + kNoticeBytes + kMaxTableBytes];
};

// One of our answers to the peer (ACK, NACK or READ_RESP), sent between
// our frames, in order. A READ_RESP's payload is sent straight from the
// region, which the answer keeps alive until it is sent.
struct TcpAnswer {
  uint32_t len = 0;  // of bytes
  uint8_t bytes[kHeaderBytes + kMaxNackMessage];
  std::shared_ptr<memory::Region> region;
  TcpPayload payload;
};

// The SUMS frame of one of our READ_RESPs whose table goes later: ready
// once that answer's payload went (its checksums are then known), so once
// the lane's answers_sent_ reached `answer`.
struct TcpSumsOut {
  uint64_t answer = 0;  // the answer's number (TcpLane's answers_queued_ then)
  uint32_t len = 0;  // of bytes
  uint8_t bytes[kHeaderBytes + kMaxChecksumTableBytes];
};

// Whether this end reads SUMS frames (a READ_RESP with the sums-later flag
// is refused otherwise), and whether the peer does (a large verified
// answer's table goes inline otherwise): TcpLink::AgreeFraming, from the
// handshake.
struct TcpSumsFrames {
  bool ours = true;
  bool peers = true;
};

// Which pieces of a batch are memory that can fault, which TLS copies
// guarded: the first frame or answer's, and any.
struct TcpGuarded {
  bool first = false;
  bool any = false;
};

// Appends pieces to an iovec array, leaving out the first `skip` bytes,
// until `max` iovecs are used (then drops the rest).
struct TcpIovOut {
  iovec* iov;
  size_t max;
  size_t skip = 0;
  size_t count = 0;
  size_t bytes = 0;
  bool full() const { return count == max; }
  void Add(const void* data, size_t len);
};

}  // namespace xferd::transport::tcp
