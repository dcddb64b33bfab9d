// What a TCP lane (tcp_lane.h) keeps to send: its frames in flight, its
// answers to the peer's frames, and the builder that gathers their pieces
// into one sendmsg.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "daemon/memory/region.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::tcp {

inline constexpr uint32_t kTcpNoZeros = UINT32_MAX;  // zeros_from: no zeros

// One of our frames: header, notice and block table, then (WRITE) the
// blocks' payload from region memory. A READ's payload comes back into
// the same blocks.
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
  bool checksums_due = false;        // a verified WRITE's, until it goes
  // A WRITE from memory that can fault: a verdict of trailer_len bytes
  // follows its payload. Payload bytes from zeros_from on are zeros once
  // the memory faulted there (`fault` says why: the op's end).
  bool guarded = false;
  uint32_t trailer_len = 0;
  uint32_t zeros_from = kTcpNoZeros;
  absl::Status fault;
  uint8_t header[kHeaderBytes + kNoticeBytes + kMaxTableBytes + kMaxChecksumTableBytes];
};

// One of our answers to the peer (ACK, NACK or READ_RESP), sent between
// our frames, in order. A READ_RESP's payload is sent straight from the
// region, which the answer keeps alive until it is sent.
struct TcpAnswer {
  uint32_t len = 0;  // of bytes
  uint8_t bytes[kHeaderBytes + kMaxNackMessage];
  std::shared_ptr<memory::Region> region;
  uint32_t payload_iovs = 0;
  iovec payload[kMaxBlocksPerOp];
  // As TcpTxSlot's: a READ_RESP from memory that can fault.
  bool guarded = false;
  uint32_t trailer_len = 0;
  uint32_t zeros_from = kTcpNoZeros;
  // A verified READ_RESP's checksum table, sent last: each block's is
  // taken piece by piece as the socket takes its bytes (`running`), and the
  // table is filled once the payload went.
  bool checksums_due = false;
  uint32_t checksums_len = 0;
  uint8_t checksums[kMaxChecksumTableBytes];
  uint64_t running[kMaxBlocksPerOp];
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
