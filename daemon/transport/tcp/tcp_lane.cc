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
      answers_(2 * size_t{depth} + 8),
      // Waiting SUMS frames: those of answers queued, and of answers that
      // went in the last batch (those of earlier ones go before any more).
      sums_(2 * answers_.size()) {}

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
    s.payload.Reset(op.kind == OpKind::kWrite && op.local_region != nullptr &&
                    op.local_region->can_lose_memory());
    if (!s.fault.ok()) s.fault = absl::OkStatus();  // the slot's last frame was poisoned
    FrameHeader header;
    header.type = op.kind == OpKind::kWrite ? FrameType::kWrite : FrameType::kReadReq;
    header.flags = (op.notice != nullptr ? kFlagNotice : 0) |
                   (s.payload.guarded ? kFlagVerdict : 0) |
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
      const Block& block = op.blocks[b];
      EncodeBlockEntry(block.remote_offset, block.length, s.header + s.header_len);
      s.header_len += kBlockEntryBytes;
      if (op.kind == OpKind::kWrite) {
        s.payload.Add(op.local_base + block.local_offset, block.length);
      }
    }
    if (op.kind == OpKind::kWrite && op.checksums != nullptr) s.payload.Verify(false);
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

size_t TcpLane::WireBytes(const TxSlot& s) { return s.header_len + s.payload.wire_bytes(); }

size_t TcpLane::WireBytes(const Answer& a) { return a.len + a.payload.wire_bytes(); }

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

// The pieces of frame `s` from byte `offset` on: header, then (WRITE) its
// payload. False if its checksum table is held back (AddPayloadIov).
bool TcpLane::AddFrameIov(const TxSlot& s, size_t offset, IovOut& out) const {
  out.skip = offset;
  out.Add(s.header, s.header_len);
  return AddPayloadIov(s.payload, out);
}

// Payload `p`: its pieces straight from the region, its verdict, and its
// checksum table, unless that waits for the pieces to go first (false).
bool TcpLane::AddPayloadIov(const Payload& p, IovOut& out) const {
  uint64_t pos = 0;
  for (uint32_t i = 0; i < p.count; ++i) {
    AddPayloadPiece(out, p.pieces[i].iov_base, p.pieces[i].iov_len, &pos, p.zeros_from);
  }
  if (p.trailer_len > 0) out.Add(Trailer(p.zeros_from), p.trailer_len);
  if (p.checksums_due && !p.table_later) return false;
  if (p.checksums_len > 0) out.Add(p.checksums, p.checksums_len);
  return true;
}

// Order on the wire: the rest of a half-sent frame, then the SUMS frames of
// answers that went, then answers (both go only between frames), then the
// following frames. A verified payload's checksums are taken where its
// bytes are in cache: a large one's behind the kernel's copy, piece by
// piece as the socket takes them (Consume); a small one's
// (SumAheadIfSmall) as it joins the batch, just before its copy. Nothing
// follows a large WRITE in a batch until its table may go; a large
// READ_RESP's table goes in a SUMS frame in a later batch, so a batch
// carries many answers (a scattered read's 64-block answers), but any
// other answer waits for the SUMS frames of those before it.
size_t TcpLane::BuildIov(iovec* iov, size_t max_iov, Guarded* guarded) {
  IovOut out{iov, max_iov};
  *guarded = Guarded{};
  sums_in_batch_ = 0;
  uint64_t seq = sent_ + 1;
  bool first = true;
  auto mark = [&](bool item_guarded) {
    if (first) guarded->first = item_guarded;
    first = false;
    guarded->any |= item_guarded;
  };
  if (send_offset_ > 0) {
    const TxSlot& s = slot(seq++);
    mark(s.payload.guarded);
    if (!AddFrameIov(s, send_offset_, out)) return out.count;
  }
  if (answer_offset_ == 0) {
    for (uint64_t t = sums_sent_ + 1; t <= sums_queued_ && !out.full(); ++t) {
      const SumsOut& sums = sums_[t % sums_.size()];
      if (sums.answer > answers_sent_) break;  // its answer's payload has not gone
      out.skip = t == sums_sent_ + 1 ? sums_offset_ : 0;
      out.Add(sums.bytes, sums.len);
      mark(false);
      ++sums_in_batch_;
    }
  }
  for (uint64_t a = answers_sent_ + 1; a <= answers_queued_ && !out.full(); ++a) {
    Answer& answer = answers_[a % answers_.size()];
    if (out.count + 3 + answer.payload.count > max_iov) return out.count;
    const uint64_t next_sums = sums_sent_ + sums_in_batch_ + 1;
    if (!answer.payload.table_later && next_sums <= sums_queued_ &&
        sums_[next_sums % sums_.size()].answer < a) {
      return out.count;  // after the SUMS of an answer in this batch
    }
    SumAheadIfSmall(answer.payload, answer.region.get(), nullptr);
    out.skip = a == answers_sent_ + 1 ? answer_offset_ : 0;
    out.Add(answer.bytes, answer.len);
    mark(answer.payload.guarded);
    if (!AddPayloadIov(answer.payload, out)) return out.count;
  }
  while (seq <= posted_ && out.count + 3 + slot(seq).payload.count <= max_iov) {
    TxSlot& s = slot(seq++);
    SumAheadIfSmall(s.payload, s.region, s.checksums);
    mark(s.payload.guarded);
    if (!AddFrameIov(s, 0, out)) break;
  }
  return out.count;
}

// Advances the send cursors over `bytes` just written, in BuildIov's order.
void TcpLane::Consume(size_t bytes) {
  auto consume_frame = [&]() -> bool {
    TxSlot& s = slot(sent_ + 1);
    const size_t left = WireBytes(s) - send_offset_;
    if (s.payload.checksums_due) {
      SumSent(s.payload, s.region, s.header_len, send_offset_, send_offset_ + std::min(bytes, left),
              s.checksums);
    }
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
  for (; sums_in_batch_ > 0; --sums_in_batch_) {
    const size_t left = sums_[(sums_sent_ + 1) % sums_.size()].len - sums_offset_;
    if (bytes < left) {
      sums_offset_ += bytes;
      return;
    }
    bytes -= left;
    sums_offset_ = 0;
    ++sums_sent_;
  }
  while (answers_sent_ < answers_queued_) {
    Answer& answer = answers_[(answers_sent_ + 1) % answers_.size()];
    const size_t left = WireBytes(answer) - answer_offset_;
    if (answer.payload.checksums_due) {
      SumSent(answer.payload, answer.region.get(), answer.len, answer_offset_,
              answer_offset_ + std::min(bytes, left), nullptr);
    }
    if (bytes < left) {
      answer_offset_ += bytes;
      return;
    }
    bytes -= left;
    answer_offset_ = 0;
    if (answer.payload.table_later) SumsReady(answer);
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
  a.region.reset();
  a.payload.Reset(false);
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
// one's checksums are taken as its payload goes (BuildIov says when).
void TcpLane::AnswerRead(const std::shared_ptr<memory::Region>& region) {
  const bool verified = (rx_frame_.flags & kFlagChecksums) != 0;
  // A peer that predates SUMS frames gets every table inline, after its
  // payload, as it always did.
  const bool later = verified && rx_frame_.length > kSumAheadBytes && sums_frames_.peers;
  if (later && sums_queued_ - sums_sent_ >= sums_.size()) {
    (void)Fail(ProtocolError("peer does not read its answers"));
    return;
  }
  Answer* a = NewAnswerAfterAcks();
  if (a == nullptr) return;
  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.length = rx_frame_.length;
  resp.seq = rx_frame_.seq;
  a->payload.Reset(region->can_lose_memory());
  resp.flags = (a->payload.guarded ? kFlagVerdict : 0) | (!verified ? 0
                                                          : later   ? kFlagSumsLater
                                                                    : kFlagChecksums);
  resp.blocks = verified ? rx_frame_.blocks : 0;
  EncodeHeader(resp, a->bytes);
  a->len = kHeaderBytes;
  a->region = region;
  for (uint32_t b = 0; b < rx_frame_.blocks; ++b) {
    uint64_t offset;
    uint32_t length;
    DecodeBlockEntry(rx_header_ + kHeaderBytes + b * kBlockEntryBytes, &offset, &length);
    a->payload.Add(region->data() + offset, length);
  }
  if (verified) a->payload.Verify(later);
  if (later) {
    SumsOut& sums = sums_[++sums_queued_ % sums_.size()];
    sums.answer = answers_queued_;
    FrameHeader header;
    header.type = FrameType::kSums;
    header.blocks = rx_frame_.blocks;
    header.seq = rx_frame_.seq;
    EncodeHeader(header, sums.bytes);
    sums.len = static_cast<uint32_t>(kHeaderBytes + rx_frame_.blocks * kChecksumBytes);
  }
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
  sums_sent_ = sums_queued_;
  sums_offset_ = 0;
  rx_awaiting_sums_ = 0;
  rx_region_.reset();
  tls_stage_len_ = tls_stage_sent_ = 0;
  ssl_.reset();  // before its socket
  kernel_tls_ = false;
  fd_.reset();
}

}  // namespace xferd::transport::tcp
