// TcpLane, verified frames (docs/integrity.md): the source's checksums,
// taken as a frame or answer goes out (BuildIov says when) and carried in
// it; the destination's check of what landed against them; the MISMATCH
// answer that replaces a WRITE's acknowledgement when blocks differ; and
// the test-build hook that corrupts a received payload for the tests to
// catch.
#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"
#include "daemon/common/log.h"
#include "daemon/memory/checksum.h"
#include "daemon/transport/tcp/tcp_lane.h"
#include "daemon/transport/verified_op.h"

namespace xferd::transport::tcp {

// A WRITE's table follows its block table in the header.
void TcpLane::TakeChecksums(TxSlot& s) {
  iovec pieces[kMaxBlocksPerOp];
  for (uint32_t b = 0; b < s.block_count; ++b) {
    pieces[b] = {s.local_base + s.blocks[b].local_offset, s.blocks[b].length};
  }
  transport::TakeChecksums(s.region, pieces, s.block_count, s.checksums);
  uint8_t* table = s.header + s.header_len - s.block_count * kChecksumBytes;
  for (uint32_t b = 0; b < s.block_count; ++b) StoreLE(table + b * kChecksumBytes, s.checksums[b]);
  s.checksums_due = false;
}

// Bytes [from, to) of READ_RESP `a`'s wire form just went: its blocks'
// checksums take the payload among them while the kernel's copy left it
// in cache, and its table (after the payload and verdict) is filled once
// the payload went. Memory that can fault is checksummed through guarded
// copies instead, once, at the end; a page gone meanwhile fails the answer
// by its verdict, and its checksum is never looked at.
void TcpLane::SumSent(Answer& a, size_t from, size_t to) {
  size_t pos = a.len;  // the payload's first byte on the wire
  for (uint32_t b = 0; b < a.payload_iovs; ++b) {
    const iovec& piece = a.payload[b];
    const size_t start = std::max(from, pos);
    const size_t end = std::min(to, pos + piece.iov_len);
    if (start < end && !a.guarded) {
      a.running[b] = memory::BlockChecksum(
          static_cast<const std::byte*>(piece.iov_base) + (start - pos), end - start, a.running[b]);
    }
    pos += piece.iov_len;
  }
  if (to < pos) return;  // more payload to go
  if (a.guarded) transport::TakeChecksums(a.region.get(), a.payload, a.payload_iovs, a.running);
  for (uint32_t b = 0; b < a.payload_iovs; ++b) {
    StoreLE(a.checksums + b * kChecksumBytes, a.running[b]);
  }
  a.checksums_due = false;
}

// The verified WRITE rx_frame_ is placed: whether its blocks hold what the
// writer's checksums say. If not, it is answered MISMATCH (how many blocks
// differ, the first, its landed checksum) instead of acknowledged, and a
// notice it carries is not landed: the writer fails the transfer, naming
// the block.
bool TcpLane::LandedAsSent() {
  // The frame's tables are still in rx_header_ (what followed the payload
  // went to its start).
  const uint8_t* entries = rx_header_ + kHeaderBytes + (rx_has_notice_ ? kNoticeBytes : 0);
  const uint8_t* table = entries + rx_frame_.blocks * kBlockEntryBytes;
  iovec landed[kMaxBlocksPerOp];
  uint64_t sent[kMaxBlocksPerOp];
  for (uint32_t b = 0; b < rx_frame_.blocks; ++b) {
    uint64_t offset;
    uint32_t length;
    DecodeBlockEntry(entries + b * kBlockEntryBytes, &offset, &length);
    landed[b] = {rx_region_->data() + offset, length};
    sent[b] = LoadLE<uint64_t>(table + b * kChecksumBytes);
  }
  FlipBitForTest(landed, rx_frame_.blocks);
  ChecksumMismatch mismatch;
  if (CheckLanded(rx_region_.get(), landed, rx_frame_.blocks, sent, &mismatch)) return true;
  link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
  Answer* a = NewAnswerAfterAcks();
  if (a == nullptr) return false;
  FrameHeader frame;
  frame.type = FrameType::kMismatch;
  frame.blocks = static_cast<uint16_t>(mismatch.blocks);
  frame.word = mismatch.first;
  frame.landed_checksum = mismatch.landed;
  frame.seq = rx_frame_.seq;
  EncodeHeader(frame, a->bytes);
  a->len = kHeaderBytes;
  return false;
}

// Our verified READ `s` is in, with the source's checksums in rx_header_:
// they become the op's, and what landed is checked against them.
void TcpLane::FinishVerifiedRead(const TxSlot& s, CompletionSink& sink) {
  iovec landed[kMaxBlocksPerOp];
  for (uint32_t b = 0; b < s.block_count; ++b) {
    landed[b] = {s.local_base + s.blocks[b].local_offset, s.blocks[b].length};
    s.checksums[b] = LoadLE<uint64_t>(rx_header_ + b * kChecksumBytes);
  }
  FlipBitForTest(landed, s.block_count);
  ChecksumMismatch mismatch;
  const bool good = CheckLanded(s.region, landed, s.block_count, s.checksums, &mismatch);
  mismatch.checksums = s.checksums;
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr, good ? nullptr : &mismatch});
}

// The peer placed our verified WRITE, but some blocks landed other bytes
// than we sent (their checksums differ): the op moved, and the engine fails
// its transfer naming the block.
absl::Status TcpLane::HandleMismatch(CompletionSink& sink) {
  if (rx_frame_.seq != acked_ + 1 || rx_frame_.seq > sent_) {
    return ProtocolError(
        absl::StrCat("MISMATCH ", rx_frame_.seq, " is not the oldest frame in flight"));
  }
  const TxSlot& s = slot(rx_frame_.seq);
  if (s.kind != OpKind::kWrite || s.checksums == nullptr || rx_frame_.word >= s.block_count ||
      rx_frame_.blocks > s.block_count) {
    return ProtocolError(
        absl::StrCat("MISMATCH ", rx_frame_.seq, " does not fit a verified write"));
  }
  ++acked_;
  if (!s.fault.ok()) {
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &s.fault});
    return absl::OkStatus();
  }
  const ChecksumMismatch mismatch{s.checksums, rx_frame_.blocks, rx_frame_.word,
                                  rx_frame_.landed_checksum};
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr, &mismatch});
  return absl::OkStatus();
}

// Test builds only (XFERD_TEST_HOOKS, which the sanitizer configurations
// define; never the daemon that ships): XFERD_TEST_FLIP_RX_BIT=N flips the
// lowest bit of the first byte of the last block of the Nth verified WRITE
// or READ_RESP payload this daemon receives (1 = the first), once, after it
// was placed and before it is checked: a bug in the receive path, for the
// verification tests to catch.
void TcpLane::FlipBitForTest(const iovec* landed, uint32_t count) {
#ifdef XFERD_TEST_HOOKS
  static const uint64_t target = [] {
    const char* n = std::getenv("XFERD_TEST_FLIP_RX_BIT");
    return n == nullptr ? 0 : std::strtoull(n, nullptr, 10);
  }();
  static std::atomic<uint64_t> received{0};
  if (target == 0 || received.fetch_add(1) + 1 != target) return;
  auto* byte = static_cast<uint8_t*>(landed[count - 1].iov_base);
  *byte ^= 1;
  SPDLOG_WARN("test hook: flipped a bit of received payload #{} (XFERD_TEST_FLIP_RX_BIT)", target);
#endif
}

}  // namespace xferd::transport::tcp
