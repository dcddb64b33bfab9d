// The memory a local client shares with its daemon for microsecond requests
// (docs/local-rings.md): a header, a submission ring (SQ), a completion ring
// (CQ), a message slot per CQ entry and a buffer area for block arrays, in
// one memfd the daemon creates and hands over. Both sides use these
// definitions (the Python client mirrors them); the daemon copies every
// entry out before it reads it and trusts no index the client writes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xferd::rings {

inline constexpr uint32_t kMagic = 0x474E5258;  // "XRNG" little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kPage = 4096;

// ---- the header page: offset 0 ----
// Each word one side writes is alone on its cache line, so the two sides
// never write the same line. The geometry fills the first line; it is not
// over-aligned itself, so copies of it may live anywhere (a stack frame
// under AddressSanitizer's fake stack is only 16-byte aligned).
struct Geometry {
  uint32_t magic;
  uint32_t version;
  uint32_t sq_entries;  // power of two
  uint32_t cq_entries;  // power of two, >= 2 * sq_entries
  uint64_t sq_offset;
  uint64_t cq_offset;
  uint64_t messages_offset;  // cq_entries slots of kMessageBytes
  uint64_t buffer_offset;
  uint64_t buffer_bytes;
  uint64_t total_bytes;
};

struct alignas(64) Line {
  uint64_t value;
  uint8_t pad[56];
};

struct Header {
  Geometry geometry;  // written by the daemon before the hand-over
  Line sq_tail;       // client: entries written (positions, not wrapped)
  Line sq_head;       // daemon: entries taken; their slots and arrays are free again
  Line cq_head;       // client: completions read; their slots are free again
  Line daemon_idle;   // daemon: 1 while it may sleep: ring the SQ doorbell after submitting
  Line client_waits;  // client: 1 while it sleeps on the CQ doorbell: the daemon rings it
  Line closed;        // daemon: nonzero once it stopped serving these rings (see docs)
};
static_assert(sizeof(Header) <= kPage, "the header fits its page");
static_assert(sizeof(Geometry) == 64 && offsetof(Header, sq_tail) == 64,
              "the geometry is the first cache line; the shared words follow");

// ---- submission entries (SQE): 64 bytes, in order ----
enum Opcode : uint8_t { kOpWrite = 1, kOpRead = 2 };
// How the blocks are given (the gRPC Blocks forms).
enum Form : uint8_t { kFormRange = 0, kFormList = 1, kFormStrided = 2, kFormLayout = 3 };
enum SqeFlags : uint8_t {
  // A completion with state kStateQueued (and the transfer id) as soon as the
  // transfer is admitted, before the final one.
  kFlagQueuedNotice = 1,
  // The transfer runs on to its end if the client's session closes first
  // (a request nobody waits for: its id is all the caller keeps). Without
  // it the session's closing (its socket closed, its process dead) ends it.
  kFlagDetached = 2,
  // Verify the blocks end to end (the gRPC `verify`: kFlagVerify true,
  // kFlagNoVerify false; neither: the daemon's engine.verify).
  kFlagVerify = 4,
  kFlagNoVerify = 8,
};

// Fields by form (a, b, c):
//   range:   src_offset, dst_offset, length
//   list:    count, block_length (0: a lengths array follows the offsets),
//            where the arrays are (see below): uint64 src_offsets[count],
//            dst_offsets[count] and lengths[count], one after the other
//   strided: run count, 0, where the runs are: 6 uint64 per run, as the
//            gRPC StridedRun (src_start, dst_start, block_length,
//            src_stride, dst_stride, count)
//   layout:  count, 0, where the indices are: uint32 src_indices[count],
//            dst_indices[count]; src and dst name the two layouts
// Where arrays are: with ext > 0, in the `ext` SQ slots after the entry
// (c must be 0); else at byte c of the buffer area.
// A read's expected checksums (a restore; implies verify, as on gRPC):
// `expected` uint64s right after the form's arrays, wherever those are; a
// range has no arrays, so its checksums are inline (ext slots).
struct Sqe {
  uint8_t opcode;
  uint8_t form;
  uint8_t ext;  // SQ slots after this one holding its arrays (<= kMaxExt)
  uint8_t flags;
  uint16_t slice_kib;  // slice size in KiB; 0: the daemon's default
  uint8_t priority;    // 0: default (normal); 1 critical, 2 normal, 3 bulk, 4 background
  uint8_t reserved0;   // 0
  uint32_t peer;       // name handle: node id or address
  uint32_t src;        // name handle: region (layout for kFormLayout)
  uint32_t dst;        // name handle: region (layout for kFormLayout)
  uint32_t label;      // name handle, 0: none
  uint64_t user_data;  // echoed in the completion
  uint64_t a;
  uint64_t b;
  uint64_t c;
  uint32_t timeout_ms;  // 0: none
  uint32_t expected;    // expected checksums after the arrays (reads), 0: none
};
static_assert(sizeof(Sqe) == 64, "an SQE is one cache line");
// Inline arrays: at most this many slots (2 KiB, 85 list blocks).
inline constexpr uint32_t kMaxExt = 32;

// ---- completion entries (CQE): 64 bytes ----
// A CQE is complete once its seq is its position + 1 (written last): the
// daemon fills entries from several threads, not always in order.
enum State : uint8_t { kStateQueued = 1, kStateDone = 3, kStateFailed = 4, kStateCancelled = 5 };
enum CqeFlags : uint8_t {
  kCqeMore = 1,  // a queued notice: the final completion follows
  // The transfer was verified end to end (WriteRequest.verify).
  kCqeVerified = 2,
  // A verified transfer that ended done: the message slot holds its
  // checksums (message_bytes / 8 uint64s, Transfer.checksums), when they fit
  // (kMessageBytes / 8 = 64 of them); otherwise only GetTransfer has them.
  kCqeChecksums = 4,
};

struct Cqe {
  uint64_t seq;
  uint64_t user_data;
  uint64_t transfer_id;  // 0: refused before a transfer started
  uint64_t bytes_done;
  uint64_t length;       // the transfer's bytes in all (0 when refused)
  uint64_t duration_ns;  // submitted to finished (0 for a queued notice)
  uint32_t blocks;       // blocks of the request (at most 4,194,304)
  uint32_t slices;       // ops the transfer was cut into
  uint32_t code;         // absl::StatusCode / grpc status code; 0 OK
  uint8_t state;
  uint8_t flags;
  uint16_t message_bytes;  // of the message in this position's slot
};
static_assert(sizeof(Cqe) == 64, "a CQE is one cache line");
// The message of the CQE at position p is in slot p % cq_entries; longer
// messages are cut (ending in "...").
inline constexpr size_t kMessageBytes = 512;

// ---- the shared words ----
// Indices and flags are plain 64-bit words in memory both processes map, read
// and written with these (GCC/Clang atomic builtins on the mapping).
inline uint64_t LoadAcquire(const uint64_t& word) {
  return __atomic_load_n(&word, __ATOMIC_ACQUIRE);
}
inline void StoreRelease(uint64_t& word, uint64_t value) {
  __atomic_store_n(&word, value, __ATOMIC_RELEASE);
}
// The Dekker handshake of a doorbell: a side stores its word, then this,
// then loads the other side's word (see docs/local-rings.md).
inline void FullFence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// Offsets of the areas for given sizes, page-aligned, as the daemon lays
// them out (the header page says the same).
inline Geometry Layout(uint32_t sq_entries, uint32_t cq_entries, uint64_t buffer_bytes) {
  auto pages = [](uint64_t bytes) { return (bytes + kPage - 1) / kPage * kPage; };
  Geometry g{};
  g.magic = kMagic;
  g.version = kVersion;
  g.sq_entries = sq_entries;
  g.cq_entries = cq_entries;
  g.sq_offset = kPage;
  g.cq_offset = g.sq_offset + pages(uint64_t{sq_entries} * sizeof(Sqe));
  g.messages_offset = g.cq_offset + pages(uint64_t{cq_entries} * sizeof(Cqe));
  g.buffer_offset = g.messages_offset + pages(uint64_t{cq_entries} * kMessageBytes);
  g.buffer_bytes = pages(buffer_bytes);
  g.total_bytes = g.buffer_offset + g.buffer_bytes;
  return g;
}

}  // namespace xferd::rings
