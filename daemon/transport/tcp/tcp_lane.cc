// TcpLane, transmit side: our frames and our answers to the peer's frames,
// in the order the socket writes of tcp_lane_io.cc carry them.
#include "daemon/transport/tcp/tcp_lane.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_worker.h"

namespace xferd::transport::tcp {

TcpLane::TcpLane(Link& link, const memory::RegionRegistry& regions, uint32_t depth)
    : link_(link),
      regions_(regions),
      tx_ring_(depth),
      // The peer has at most its own depth of frames in flight, each earning
      // at most one answer, and ACKs coalesce: a peer that overflows this
      // does not read what we send.
      answers_(2 * size_t{depth} + 8) {}

TcpLane::~TcpLane() = default;

uint32_t TcpLane::credits() const {
  if (!fd_.valid() || broken()) return 0;
  return static_cast<uint32_t>(tx_ring_.size() - (posted_ - acked_));
}

uint32_t TcpLane::Post(absl::Span<const DataOp> ops) {
  const uint32_t n = std::min<uint32_t>(credits(), static_cast<uint32_t>(ops.size()));
  for (uint32_t i = 0; i < n; ++i) {
    const DataOp& op = ops[i];
    XFERD_DCHECK(op.block_count >= 1 && op.block_count <= kMaxBlocksPerOp);
    const uint64_t seq = ++posted_;
    TxSlot& s = slot(seq);
    s.cookie = op.cookie;
    s.kind = op.kind;
    s.payload_len = op.length;
    s.local_base = op.local_base;
    s.blocks = op.blocks;
    s.block_count = op.block_count;
    s.region = op.local_region;
    s.checksums = op.checksums;
    s.guarded = op.kind == OpKind::kWrite && op.local_region != nullptr &&
                op.local_region->can_lose_memory();
    s.trailer_len = s.guarded ? kVerdictBytes : 0;
    if (s.zeros_from != kNoZeros) {  // the slot's last frame was poisoned
      s.zeros_from = kNoZeros;
      s.fault = absl::OkStatus();
    }
    FrameHeader header;
    header.type = op.kind == OpKind::kWrite ? FrameType::kWrite : FrameType::kReadReq;
    header.flags = (op.notice != nullptr ? kFlagNotice : 0) | (s.guarded ? kFlagVerdict : 0) |
                   (op.checksums != nullptr ? kFlagChecksums : 0);
    header.blocks = static_cast<uint16_t>(op.block_count);
    header.word = op.remote->region_id;
    header.length = op.length;
    header.seq = seq;
    EncodeHeader(header, s.header);
    s.header_len = kHeaderBytes;
    if (op.notice != nullptr) {
      EncodeNotice(*op.notice, s.header + s.header_len);
      s.header_len += kNoticeBytes;
    }
    for (uint32_t b = 0; b < op.block_count; ++b) {
      EncodeBlockEntry(op.blocks[b].remote_offset, op.blocks[b].length, s.header + s.header_len);
      s.header_len += kBlockEntryBytes;
    }
    // A verified WRITE's checksum table is filled just before the frame
    // goes (BuildIov).
    s.checksums_due = op.checksums != nullptr && op.kind == OpKind::kWrite;
    if (s.checksums_due) s.header_len += op.block_count * kChecksumBytes;
  }
  if (n > 0) {
    if (worker_ != nullptr) {
      worker_->ListForFlush(*this);  // sent with the rest of this pass's posts
    } else {
      // A send error is seen again, and reported, by the next Flush/OnReadable.
      (void)Flush();
    }
  }
  return n;
}

size_t TcpLane::WireBytes(const TxSlot& s) {
  return s.header_len + (s.kind == OpKind::kWrite ? s.payload_len + s.trailer_len : 0);
}

size_t TcpLane::WireBytes(const Answer& a) {
  size_t bytes = a.len + a.trailer_len + a.checksums_len;
  for (uint32_t i = 0; i < a.payload_iovs; ++i) bytes += a.payload[i].iov_len;
  return bytes;
}

void TcpIovOut::Add(const void* data, size_t len) {
  if (skip >= len) {
    skip -= len;
    return;
  }
  if (full()) return;
  iov[count++] = {const_cast<std::byte*>(static_cast<const std::byte*>(data)) + skip, len - skip};
  bytes += len - skip;
  skip = 0;
}

// The pieces of frame `s` from byte `offset` on: header, then (WRITE) each
// block's payload straight from the region, then the verdict if it has one.
void TcpLane::AddFrameIov(const TxSlot& s, size_t offset, IovOut& out) const {
  out.skip = offset;
  out.Add(s.header, s.header_len);
  if (s.kind != OpKind::kWrite) return;
  uint64_t pos = 0;
  for (uint32_t b = 0; b < s.block_count; ++b) {
    const Block& block = s.blocks[b];
    AddPayloadPiece(out, s.local_base + block.local_offset, block.length, &pos, s.zeros_from);
  }
  if (s.trailer_len > 0) out.Add(Trailer(s.zeros_from), s.trailer_len);
}

// Order on the wire: the rest of a half-sent frame, then answers (which go
// only between frames), then the following frames. Verified, the source's
// checksums are taken where its bytes are in cache either way: a WRITE's
// (its table leads) as the frame first joins a batch, and none joins one
// already carrying kChecksumAheadBytes, so the kernel's copy follows the
// checksum's pass closely; a READ_RESP's (its table comes last) behind the
// kernel's copy, piece by piece as the socket takes them (Consume), the
// copy having also fetched the scattered blocks faster than a checksum's
// pass does.
size_t TcpLane::BuildIov(iovec* iov, size_t max_iov, Guarded* guarded) {
  IovOut out{iov, max_iov};
  *guarded = Guarded{};
  uint64_t seq = sent_ + 1;
  bool first = true;
  auto mark = [&](bool item_guarded) {
    if (first) guarded->first = item_guarded;
    first = false;
    guarded->any |= item_guarded;
  };
  if (send_offset_ > 0) {
    const TxSlot& s = slot(seq++);
    AddFrameIov(s, send_offset_, out);
    mark(s.guarded);
  }
  for (uint64_t a = answers_sent_ + 1; a <= answers_queued_ && !out.full(); ++a) {
    const Answer& answer = answers_[a % answers_.size()];
    if (out.count + 3 + answer.payload_iovs > max_iov) return out.count;
    out.skip = a == answers_sent_ + 1 ? answer_offset_ : 0;
    out.Add(answer.bytes, answer.len);
    uint64_t pos = 0;
    for (uint32_t i = 0; i < answer.payload_iovs; ++i) {
      const iovec& p = answer.payload[i];
      AddPayloadPiece(out, p.iov_base, p.iov_len, &pos, answer.zeros_from);
    }
    if (answer.trailer_len > 0) out.Add(Trailer(answer.zeros_from), answer.trailer_len);
    mark(answer.guarded);
    if (answer.checksums_due) return out.count;  // the table waits for the payload (Consume)
    if (answer.checksums_len > 0) out.Add(answer.checksums, answer.checksums_len);
  }
  while (seq <= posted_ && out.count + 2 + slot(seq).block_count <= max_iov) {
    TxSlot& s = slot(seq++);
    if (s.checksums_due) {
      if (out.bytes >= kChecksumAheadBytes) break;
      TakeChecksums(s);
    }
    AddFrameIov(s, 0, out);
    mark(s.guarded);
  }
  return out.count;
}

// Advances the send cursors over `bytes` just written, in BuildIov's order.
void TcpLane::Consume(size_t bytes) {
  auto consume_frame = [&]() -> bool {
    const size_t left = WireBytes(slot(sent_ + 1)) - send_offset_;
    if (bytes < left) {
      send_offset_ += bytes;
      bytes = 0;
      return false;
    }
    bytes -= left;
    send_offset_ = 0;
    ++sent_;
    return true;
  };
  if (send_offset_ > 0 && !consume_frame()) return;
  while (answers_sent_ < answers_queued_) {
    Answer& answer = answers_[(answers_sent_ + 1) % answers_.size()];
    const size_t left = WireBytes(answer) - answer_offset_;
    if (answer.checksums_due)
      SumSent(answer, answer_offset_, answer_offset_ + std::min(bytes, left));
    if (bytes < left) {
      answer_offset_ += bytes;
      return;
    }
    bytes -= left;
    answer_offset_ = 0;
    answer.region.reset();  // its payload is on the wire
    ++answers_sent_;
  }
  while (bytes > 0 && sent_ < posted_ && consume_frame()) {
  }
}

// A free answer slot, or null when the peer does not read its answers.
TcpLane::Answer* TcpLane::NewAnswer() {
  if (answers_queued_ - answers_sent_ >= answers_.size()) return nullptr;
  Answer& a = answers_[++answers_queued_ % answers_.size()];
  a.len = 0;
  a.payload_iovs = 0;
  a.region.reset();
  a.guarded = false;
  a.trailer_len = 0;
  a.zeros_from = kNoZeros;
  a.checksums_len = 0;
  return &a;
}

void TcpLane::QueueAck() {
  if (ack_pending_ == ack_sent_) return;
  Answer* a = NewAnswer();
  if (a == nullptr) {
    (void)Fail(ProtocolError("peer does not read its acknowledgements"));
    return;
  }
  FrameHeader ack;
  ack.type = FrameType::kAck;
  ack.seq = ack_pending_;
  EncodeHeader(ack, a->bytes);
  a->len = kHeaderBytes;
  ack_sent_ = ack_pending_;
}

// A slot for an answer to the peer's frame just received, after the
// acknowledgement of every WRITE before it (answers go in the order of the
// frames they answer); null, the lane failed, when the peer does not read
// its answers.
TcpLane::Answer* TcpLane::NewAnswerAfterAcks() {
  QueueAck();
  Answer* a = NewAnswer();
  if (a == nullptr) (void)Fail(ProtocolError("peer does not read its answers"));
  return a;
}

void TcpLane::QueueNack(uint64_t seq, const absl::Status& why) {
  Answer* a = NewAnswerAfterAcks();
  if (a == nullptr) return;
  const absl::string_view text = why.message().substr(0, kMaxNackMessage);
  FrameHeader nack;
  nack.type = FrameType::kNack;
  nack.word = static_cast<uint32_t>(why.code());
  nack.length = static_cast<uint32_t>(text.size());
  nack.seq = seq;
  EncodeHeader(nack, a->bytes);
  std::memcpy(a->bytes + kHeaderBytes, text.data(), text.size());
  a->len = static_cast<uint32_t>(kHeaderBytes + text.size());
}

// Answers READ_REQ rx_frame_ (validated) with the blocks of its table,
// straight from `region`, which the answer keeps until sent; a verified
// one's checksums are taken as its payload goes (Consume).
void TcpLane::AnswerRead(const std::shared_ptr<memory::Region>& region) {
  Answer* a = NewAnswerAfterAcks();
  if (a == nullptr) return;
  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.length = rx_frame_.length;
  resp.seq = rx_frame_.seq;
  a->guarded = region->can_lose_memory();
  a->trailer_len = a->guarded ? kVerdictBytes : 0;
  const bool verified = (rx_frame_.flags & kFlagChecksums) != 0;
  resp.flags = (a->guarded ? kFlagVerdict : 0) | (verified ? kFlagChecksums : 0);
  resp.blocks = verified ? rx_frame_.blocks : 0;
  EncodeHeader(resp, a->bytes);
  a->len = kHeaderBytes;
  a->region = region;
  for (uint32_t b = 0; b < rx_frame_.blocks; ++b) {
    uint64_t offset;
    uint32_t length;
    DecodeBlockEntry(rx_header_ + kHeaderBytes + b * kBlockEntryBytes, &offset, &length);
    a->payload[a->payload_iovs++] = {region->data() + offset, length};
  }
  a->checksums_due = verified;
  a->checksums_len = verified ? rx_frame_.blocks * kChecksumBytes : 0;
  if (verified) std::fill_n(a->running, a->payload_iovs, 0);
  link_.counters().bytes_sent.fetch_add(rx_frame_.length, std::memory_order_relaxed);
}

absl::Status TcpLane::ProtocolError(absl::string_view what) const {
  return absl::UnavailableError(
      absl::StrCat("protocol error on lane from ", link_.peer().node_id, ": ", what));
}

absl::Status TcpLane::Fail(absl::Status error) {
  if (error_.ok()) error_ = std::move(error);
  return error_;
}

void TcpLane::Detach(const absl::Status& error, CompletionSink& sink) {
  (void)Fail(error);
  while (acked_ < posted_) {
    const TxSlot& s = slot(++acked_);
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, s.fault.ok() ? &error : &s.fault});
  }
  sent_ = posted_;
  send_offset_ = 0;
  for (Answer& a : answers_) a.region.reset();
  answers_sent_ = answers_queued_;
  answer_offset_ = 0;
  rx_region_.reset();
  tls_stage_len_ = tls_stage_sent_ = 0;
  ssl_.reset();  // before its socket
  kernel_tls_ = false;
  fd_.reset();
}

}  // namespace xferd::transport::tcp
