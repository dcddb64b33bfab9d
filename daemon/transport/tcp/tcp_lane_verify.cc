// TcpLane, verified frames (docs/integrity.md): the source's checksums,
// taken as a frame's or answer's payload goes out (BuildIov says when) and
// sent after it; the destination's check of what landed against them; the MISMATCH
// answer that replaces a WRITE's acknowledgement when blocks differ; and
// the test-build hook that corrupts a received payload for the tests to
// catch.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"
#include "daemon/memory/checksum.h"
#include "daemon/transport/tcp/tcp_lane.h"
#include "daemon/transport/verified_op.h"

namespace xferd::transport::tcp {

// Bytes [from, to) of a frame's or answer's wire form just went, its
// payload `p` starting at byte `payload_at`: each piece's checksum takes
// the bytes among them while the kernel's copy left them in cache, and the
// table is filled (and copied to `out`, if any) once the payload went.
// Memory that can fault is checksummed through guarded copies instead,
// once, at the end; a page gone meanwhile fails the payload by its verdict,
// and its checksum is never looked at.
void TcpLane::SumSent(Payload& p, const memory::Region* region, size_t payload_at, size_t from,
                      size_t to, uint64_t* out) {
  from = std::max(from, payload_at + p.summed);  // OpenSSL's repeated writes (SumForTls)
  size_t pos = payload_at;
  for (uint32_t b = 0; b < p.count && pos < to; ++b) {
    const iovec& piece = p.pieces[b];
    const size_t start = std::max(from, pos);
    const size_t end = std::min(to, pos + piece.iov_len);
    if (start < end && !p.guarded) {
      p.running[b] = memory::BlockChecksum(
          static_cast<const std::byte*>(piece.iov_base) + (start - pos), end - start, p.running[b]);
    }
    pos += piece.iov_len;
  }
  if (to > from) p.summed = static_cast<uint32_t>(std::min(to - payload_at, size_t{p.length}));
  if (p.summed < p.length) return;  // more payload to go
  if (p.guarded) transport::TakeChecksums(region, p.pieces, p.count, p.running);
  for (uint32_t b = 0; b < p.count; ++b) StoreLE(p.checksums + b * kChecksumBytes, p.running[b]);
  if (out != nullptr) std::copy_n(p.running, p.count, out);
  p.checksums_due = false;
}

// OpenSSL encrypts the bytes of a direct write (tcp_lane_io.cc) when first
// asked, and may report them written only when asked again: `len` bytes at
// the send cursor are checksummed as it is given them. Such a piece is
// never an item's start (a header is gathered), so the cursor is inside a
// half-sent frame or answer.
void TcpLane::SumForTls(size_t len) {
  if (send_offset_ > 0) {
    TxSlot& s = slot(sent_ + 1);
    if (s.payload.checksums_due) {
      SumSent(s.payload, s.region, s.header_len, send_offset_, send_offset_ + len, s.checksums);
    }
  } else if (answers_sent_ < answers_queued_) {
    Answer& a = answers_[(answers_sent_ + 1) % answers_.size()];
    if (a.payload.checksums_due) {
      SumSent(a.payload, a.region.get(), a.len, answer_offset_, answer_offset_ + len, nullptr);
    }
  }
}

// A small verified payload's checksums are taken as it joins a batch: its
// bytes are then in cache for the copy right behind, and the frames after
// it need not wait for its table.
void TcpLane::SumAheadIfSmall(Payload& p, const memory::Region* region, uint64_t* out) {
  if (p.checksums_due && p.length <= kSumAheadBytes) SumSent(p, region, 0, 0, p.length, out);
}

// The verified WRITE rx_frame_ is placed: whether its blocks hold what the
// writer's checksums say. If not, it is answered MISMATCH (how many blocks
// differ, the first, its landed checksum) instead of acknowledged, and a
// notice it carries is not landed: the writer fails the transfer, naming
// the block.
bool TcpLane::LandedAsSent() {
  // The blocks are rx_iov_; the table followed the payload into rx_header_.
  uint64_t sent[kMaxBlocksPerOp];
  for (uint32_t b = 0; b < rx_frame_.blocks; ++b) {
    sent[b] = LoadLE<uint64_t>(rx_header_ + b * kChecksumBytes);
  }
  FlipBitForTest(rx_iov_, rx_frame_.blocks);
  ChecksumMismatch mismatch;
  if (CheckLanded(rx_region_.get(), rx_iov_, rx_frame_.blocks, sent, &mismatch)) return true;
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

// Our verified READ `s` is in (its blocks are rx_iov_), with the source's
// checksums in rx_header_: they become the op's, and what landed is checked
// against them.
void TcpLane::FinishVerifiedRead(const TxSlot& s, CompletionSink& sink) {
  for (uint32_t b = 0; b < s.block_count; ++b) {
    s.checksums[b] = LoadLE<uint64_t>(rx_header_ + b * kChecksumBytes);
  }
  FlipBitForTest(rx_iov_, s.block_count);
  ChecksumMismatch mismatch;
  const bool good = CheckLanded(s.region, rx_iov_, s.block_count, s.checksums, &mismatch);
  mismatch.checksums = s.checksums;
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr, good ? nullptr : &mismatch});
}

// Our verified READ `s` is in (its blocks are rx_iov_), its table to come
// in a SUMS frame: what landed is checksummed now, while it is in cache.
void TcpLane::AwaitSums(TxSlot& s, const absl::Status& outcome) {
  s.read_error = outcome;
  if (!outcome.ok()) return;
  FlipBitForTest(rx_iov_, s.block_count);
  TakeChecksums(s.region, rx_iov_, s.block_count, s.landed);
}

// A SUMS frame: the source's checksums of the oldest read awaiting them.
absl::Status TcpLane::OnSumsHeader() {
  if (rx_awaiting_sums_ == 0 || rx_frame_.seq != acked_ + 1) {
    return ProtocolError(absl::StrCat("SUMS ", rx_frame_.seq,
                                      " does not follow a READ_RESP whose table is to come"));
  }
  const TxSlot& s = slot(rx_frame_.seq);
  if (rx_frame_.blocks != s.block_count) {
    return ProtocolError(absl::StrCat("SUMS ", rx_frame_.seq, " holds ", rx_frame_.blocks,
                                      " checksums for a read of ", s.block_count, " blocks"));
  }
  rx_want_ = rx_frame_.blocks * kChecksumBytes;
  rx_state_ = RxState::kSums;
  return absl::OkStatus();
}

// The SUMS frame is in (rx_header_): they become the read's checksums, and
// what landed is compared with them.
void TcpLane::FinishSums(CompletionSink& sink) {
  rx_state_ = RxState::kHeader;
  rx_have_ = 0;
  rx_want_ = kHeaderBytes;
  --rx_awaiting_sums_;
  const TxSlot& s = slot(++acked_);
  if (!s.read_error.ok()) {
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &s.read_error});
    return;
  }
  for (uint32_t b = 0; b < s.block_count; ++b) {
    s.checksums[b] = LoadLE<uint64_t>(rx_header_ + b * kChecksumBytes);
  }
  ChecksumMismatch mismatch;
  const bool good = MatchLanded(s.landed, s.block_count, s.checksums, &mismatch);
  mismatch.checksums = s.checksums;
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr, good ? nullptr : &mismatch});
}

// A READ_RESP whose table goes later, answer answers_sent_ + 1, went whole:
// its checksums are known and go into its SUMS frame (the first of those
// whose answer had not gone), which may go from now on.
void TcpLane::SumsReady(const Answer& a) {
  uint64_t t = sums_sent_ + 1;
  while (sums_[t % sums_.size()].answer <= answers_sent_) ++t;
  SumsOut& sums = sums_[t % sums_.size()];
  XFERD_DCHECK(t <= sums_queued_ && sums.answer == answers_sent_ + 1);
  std::memcpy(sums.bytes + kHeaderBytes, a.payload.checksums, a.payload.count * kChecksumBytes);
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
