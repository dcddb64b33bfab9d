// TcpLane, receive side: the peer's frames (WRITE placed straight into the
// region, READ_REQ answered from it) and its answers to ours (ACK, NACK,
// READ_RESP received straight into our blocks). Every block of a frame is
// validated before any byte of it is placed or sent.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_lane.h"

namespace xferd::transport::tcp {
namespace {

// Frames handled per OnReadable call before yielding to other lanes, so one
// busy peer cannot starve the rest of a poller's lanes.
constexpr uint32_t kReadBudgetFrames = 256;

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace

absl::Status TcpLane::OnReadable(CompletionSink& sink, absl::Span<std::byte> scratch,
                                 uint32_t* events) {
  if (!fd_.valid() || !error_.ok()) return error_;
  absl::Status status;
  uint32_t frames = 0;
  while (status.ok() && frames < kReadBudgetFrames) {
    ssize_t n = 0;
    status = ReceiveOnce(sink, scratch, &frames, &n);
    if (!status.ok() || n > 0) continue;
    if (n == 0) {
      status = absl::UnavailableError(
          absl::StrCat("peer ", link_.peer().node_id, " closed the data connection"));
    } else if (!WouldBlock(errno)) {
      status = absl::UnavailableError(
          absl::StrCat("lane to ", link_.peer().node_id, " failed: receive: ", RecvError(errno)));
    } else {
      break;  // drained
    }
  }
  *events += frames;
  if (!status.ok()) return Fail(std::move(status));
  QueueAck();
  if (!error_.ok()) return error_;
  return Flush();
}

// One step of the receive state machine. *n > 0: progress; 0: the peer
// closed; < 0: the socket error in errno (EAGAIN: drained).
absl::Status TcpLane::ReceiveOnce(CompletionSink& sink, absl::Span<std::byte> scratch,
                                  uint32_t* frames, ssize_t* n) {
  switch (rx_state_) {
    case RxState::kHeader:
    case RxState::kTable:
    case RxState::kVerdict:
    case RxState::kChecksums:
    case RxState::kSums: {
      const size_t want = rx_want_ - rx_have_;
      *n = want > 0 ? RecvSome(rx_header_ + rx_have_, want) : 1;
      if (want > 0 && *n > 0) rx_have_ += static_cast<size_t>(*n);
      if (rx_have_ < rx_want_) return absl::OkStatus();
      *n = 1;
      if (rx_state_ == RxState::kTable) return OnTable();
      if (rx_state_ == RxState::kVerdict) return OnVerdict(sink);
      if (rx_state_ == RxState::kChecksums) {
        rx_have_ = 0;
        FinishPayload(sink);
        return absl::OkStatus();
      }
      if (rx_state_ == RxState::kSums) {
        FinishSums(sink);
        return absl::OkStatus();
      }
      ++*frames;
      return OnHeader(sink);
    }
    case RxState::kPayload:
      return ReceivePayload(sink, scratch, n);
    case RxState::kDiscard:
      *n = RecvSome(scratch.data(), std::min<size_t>(rx_left_, scratch.size()));
      if (*n > 0) {
        rx_left_ -= static_cast<uint32_t>(*n);
        if (rx_left_ == 0) EndPayload(sink);
      }
      return absl::OkStatus();
    case RxState::kText: {
      const size_t want = rx_text_len_ - rx_nack_text_.size();
      char buf[kMaxNackMessage];
      *n = want > 0 ? RecvSome(buf, want) : 1;
      if (want > 0 && *n > 0) rx_nack_text_.append(buf, static_cast<size_t>(*n));
      if (rx_nack_text_.size() == rx_text_len_) return OnTextDone(sink);
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status TcpLane::OnHeader(CompletionSink& sink) {
  if (absl::Status s = DecodeHeader(rx_header_, &rx_frame_); !s.ok()) {
    return ProtocolError(s.message());
  }
  rx_have_ = 0;
  rx_want_ = kHeaderBytes;
  const bool answer = rx_frame_.type == FrameType::kAck || rx_frame_.type == FrameType::kNack ||
                      rx_frame_.type == FrameType::kMismatch;
  if (answer && rx_awaiting_sums_ > 0) {
    return ProtocolError(absl::StrCat("an answer came before the SUMS of READ_RESP ", acked_ + 1));
  }
  switch (rx_frame_.type) {
    case FrameType::kWrite:
    case FrameType::kReadReq:
      if (rx_frame_.seq != rx_last_seq_ + 1) return ProtocolError("frame out of sequence");
      rx_last_seq_ = rx_frame_.seq;
      // The header stays in place; the notice and the block table follow it.
      rx_have_ = kHeaderBytes;
      rx_want_ = kHeaderBytes + rx_frame_.blocks * kBlockEntryBytes +
                 ((rx_frame_.flags & kFlagNotice) ? kNoticeBytes : 0);
      rx_state_ = RxState::kTable;
      return absl::OkStatus();
    case FrameType::kAck:
      return HandleAck(rx_frame_.seq, sink);
    case FrameType::kMismatch:
      return HandleMismatch(sink);
    case FrameType::kNack:
      rx_nack_text_.clear();
      rx_text_len_ = rx_frame_.length;
      rx_state_ = RxState::kText;
      return absl::OkStatus();
    case FrameType::kReadResp:
      return StartReadResponse();
    case FrameType::kSums:
      return OnSumsHeader();
    default:
      return ProtocolError("unexpected HELLO on an attached lane");
  }
}

// The frame's table is in: validate every block, then place (WRITE) or
// answer (READ_REQ) it; a refused frame is NACKed whole.
absl::Status TcpLane::OnTable() {
  rx_have_ = 0;
  rx_want_ = kHeaderBytes;
  rx_state_ = RxState::kHeader;
  const bool write = rx_frame_.type == FrameType::kWrite;
  rx_has_notice_ = (rx_frame_.flags & kFlagNotice) != 0;
  rx_is_read_resp_ = false;
  if (!rx_verdict_.ok()) rx_verdict_ = absl::OkStatus();
  std::shared_ptr<memory::Region> region;
  absl::Status verdict = CheckInbound(&region);
  if (!verdict.ok()) {
    SPDLOG_DEBUG("refused {} seq={} from {}: {}", write ? "WRITE" : "READ_REQ", rx_frame_.seq,
                 link_.peer().node_id, verdict.message());
    if (!write) {
      link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
      QueueNack(rx_frame_.seq, verdict);
      return absl::OkStatus();
    }
    // NACKed once drained: the sender may still be sending it.
    rx_refusal_ = std::move(verdict);
    rx_left_ = rx_frame_.length;
    rx_state_ = RxState::kDiscard;
    return absl::OkStatus();
  }
  if (!rx_refusal_.ok()) rx_refusal_ = absl::OkStatus();
  if (!write) {
    AnswerRead(region);
    return absl::OkStatus();
  }
  const uint8_t* entry = rx_header_ + kHeaderBytes + (rx_has_notice_ ? kNoticeBytes : 0);
  if (rx_has_notice_) rx_notice_ = DecodeNotice(rx_header_ + kHeaderBytes);
  for (uint32_t b = 0; b < rx_frame_.blocks; ++b, entry += kBlockEntryBytes) {
    uint64_t offset;
    uint32_t length;
    DecodeBlockEntry(entry, &offset, &length);
    rx_iov_[b] = {region->data() + offset, length};
  }
  rx_iov_next_ = 0;
  rx_iov_done_ = 0;
  rx_iov_count_ = rx_frame_.blocks;
  rx_guarded_ = region->can_lose_memory();
  rx_region_ = std::move(region);
  rx_state_ = RxState::kPayload;
  return absl::OkStatus();
}

// What a WRITE or READ_REQ may touch: a registered region that admits the
// peer and the access, with every block inside it and the blocks adding up
// to the frame's length.
absl::Status TcpLane::CheckInbound(std::shared_ptr<memory::Region>* out) {
  const FrameHeader& f = rx_frame_;
  const bool write = f.type == FrameType::kWrite;
  std::shared_ptr<memory::Region> region = regions_.FindById(f.word);
  if (region == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "region id ", f.word, " is not registered (deregistered since it was resolved?)"));
  }
  if (!region->PeerAllowed(link_.peer().node_id)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node '", link_.peer().node_id, "' is not in the ACL of region '", region->name(), "'"));
  }
  if (write ? !region->access().remote_write : !region->access().remote_read) {
    return absl::PermissionDeniedError(absl::StrCat(
        "region '", region->name(), "' does not allow remote ", write ? "writes" : "reads"));
  }
  if (region->lost()) return region->LostStatus();
  const uint8_t* entry = rx_header_ + kHeaderBytes + (rx_has_notice_ ? kNoticeBytes : 0);
  uint64_t total = 0;
  for (uint32_t b = 0; b < f.blocks; ++b, entry += kBlockEntryBytes) {
    uint64_t offset;
    uint32_t length;
    DecodeBlockEntry(entry, &offset, &length);
    if (length == 0) return absl::InvalidArgumentError(absl::StrCat("block ", b, " is empty"));
    absl::Status range = region->CheckRange(offset, length, write ? "destination" : "source");
    if (!range.ok()) return range;
    total += length;
  }
  if (total != f.length) {
    return absl::InvalidArgumentError(
        absl::StrCat("blocks add up to ", total, " bytes, the frame says ", f.length));
  }
  *out = std::move(region);
  return absl::OkStatus();
}

// READ_RESP: the payload of our oldest READ_REQ in flight, received straight
// into its blocks of the local region.
absl::Status TcpLane::StartReadResponse() {
  if (rx_frame_.seq != acked_ + rx_awaiting_sums_ + 1 || rx_frame_.seq > sent_) {
    return ProtocolError(
        absl::StrCat("READ_RESP ", rx_frame_.seq, " is not the oldest frame in flight"));
  }
  const TxSlot& s = slot(rx_frame_.seq);
  if (s.kind != OpKind::kRead || s.payload_len != rx_frame_.length) {
    return ProtocolError(absl::StrCat("READ_RESP ", rx_frame_.seq, " does not answer a read of ",
                                      rx_frame_.length, " bytes"));
  }
  const bool later = (rx_frame_.flags & kFlagSumsLater) != 0;
  if (later && !sums_frames_.ours) {
    return ProtocolError(absl::StrCat("READ_RESP ", rx_frame_.seq,
                                      " puts its table in a SUMS frame, which this end did not "
                                      "say it reads"));
  }
  if (rx_awaiting_sums_ > 0 && !later) {
    return ProtocolError(absl::StrCat("READ_RESP ", rx_frame_.seq,
                                      " came before the SUMS of READ_RESP ", acked_ + 1));
  }
  if (((rx_frame_.flags & (kFlagChecksums | kFlagSumsLater)) != 0) != (s.checksums != nullptr) ||
      (s.checksums != nullptr && rx_frame_.blocks != s.block_count)) {
    return ProtocolError(absl::StrCat("READ_RESP ", rx_frame_.seq,
                                      s.checksums != nullptr
                                          ? " lacks the checksums asked for, one per block"
                                          : " carries checksums not asked for"));
  }
  for (uint32_t b = 0; b < s.block_count; ++b) {
    rx_iov_[b] = {s.local_base + s.blocks[b].local_offset, s.blocks[b].length};
  }
  rx_iov_next_ = 0;
  rx_iov_done_ = 0;
  rx_iov_count_ = s.block_count;
  rx_is_read_resp_ = true;
  rx_guarded_ = s.region != nullptr && s.region->can_lose_memory();
  if (!rx_refusal_.ok()) rx_refusal_ = absl::OkStatus();
  if (!rx_verdict_.ok()) rx_verdict_ = absl::OkStatus();
  rx_state_ = RxState::kPayload;
  return absl::OkStatus();
}

// Receives payload straight into the blocks; what follows it (the next
// header, or the frame's verdict or checksum table, whose length is the
// frame's) comes in with it when available, saving a syscall per frame.
// Over TLS into memory that can fault, the payload goes through a guarded
// copy instead, alone.
absl::Status TcpLane::ReceivePayload(CompletionSink& sink, absl::Span<std::byte> scratch,
                                     ssize_t* n) {
  iovec iov[kMaxBlocksPerOp + 1];
  const uint32_t blocks = rx_iov_count_ - rx_iov_next_;
  std::copy(rx_iov_ + rx_iov_next_, rx_iov_ + rx_iov_count_, iov);
  iov[0].iov_base = static_cast<std::byte*>(iov[0].iov_base) + rx_iov_done_;
  iov[0].iov_len -= rx_iov_done_;
  const size_t follows = (rx_frame_.flags & kFlagVerdict)     ? kVerdictBytes
                         : (rx_frame_.flags & kFlagChecksums) ? rx_frame_.blocks * kChecksumBytes
                                                              : kHeaderBytes;
  iov[blocks] = {rx_header_, follows};
  *n = rx_guarded_ && ssl_ != nullptr ? ReadGuarded(iov, blocks, scratch)
                                      : ReadVec(iov, static_cast<int>(blocks + 1));
  if (*n < 0 && errno == EFAULT) return OnPlaceFault(sink, errno, n);
  if (*n <= 0) return absl::OkStatus();
  size_t got = static_cast<size_t>(*n);
  while (got > 0 && rx_iov_next_ < rx_iov_count_) {
    const size_t take = std::min(got, rx_iov_[rx_iov_next_].iov_len - rx_iov_done_);
    rx_iov_done_ += take;
    got -= take;
    if (rx_iov_done_ == rx_iov_[rx_iov_next_].iov_len) {
      ++rx_iov_next_;
      rx_iov_done_ = 0;
    }
  }
  if (rx_fault_) return OnPlaceFault(sink, EFAULT, n);
  if (rx_iov_next_ < rx_iov_count_) return absl::OkStatus();
  rx_have_ = got;  // the start of what follows
  EndPayload(sink);
  return absl::OkStatus();
}

// The payload is in (placed, or drained); rx_have_ bytes of what follows it
// are in rx_header_.
void TcpLane::EndPayload(CompletionSink& sink) {
  if (rx_frame_.flags & kFlagVerdict) {
    rx_want_ = kVerdictBytes;
    rx_state_ = RxState::kVerdict;
    return;
  }
  EndVerdict(sink);
}

// The payload and its verdict are in; a verified frame's checksum table
// follows (rx_have_ bytes of it are in rx_header_).
void TcpLane::EndVerdict(CompletionSink& sink) {
  if (rx_frame_.flags & kFlagChecksums) {
    rx_want_ = rx_frame_.blocks * kChecksumBytes;  // a READ_RESP's: its slot's count
    rx_state_ = RxState::kChecksums;
    return;
  }
  FinishPayload(sink);
}

absl::Status TcpLane::OnTextDone(CompletionSink& sink) {
  if (rx_frame_.type == FrameType::kNack) return HandleNack(sink);
  if (!rx_verdict_.ok()) rx_verdict_ = absl::Status(rx_verdict_.code(), rx_nack_text_);
  rx_have_ = 0;
  EndVerdict(sink);
  return absl::OkStatus();
}

// The frame is wholly in: its payload, and its verdict if it has one.
void TcpLane::FinishPayload(CompletionSink& sink) {
  rx_state_ = RxState::kHeader;
  rx_want_ = kHeaderBytes;
  if (rx_is_read_resp_) {
    FinishReadResponse(sink);
    return;
  }
  if (!rx_refusal_.ok()) {
    link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
    QueueNack(rx_frame_.seq, rx_refusal_);
    return;
  }
  link_.counters().bytes_received.fetch_add(rx_frame_.length, std::memory_order_relaxed);
  if (rx_verdict_.ok() && (rx_frame_.flags & kFlagChecksums) && !LandedAsSent()) {
    rx_region_.reset();  // answered MISMATCH: not acknowledged, not landed
    return;
  }
  ack_pending_ = rx_frame_.seq;
  if (!rx_verdict_.ok()) {
    // The writer's memory failed under the frame: the rest came as zeros.
    // Acknowledged (the writer fails the op itself), never landed.
    SPDLOG_DEBUG("WRITE seq={} from {} failed at its source: {}", rx_frame_.seq,
                 link_.peer().node_id, rx_verdict_.message());
    link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
    rx_region_.reset();
    return;
  }
  // Frames of one lane land in order, and the sender sends a transfer's final
  // (notice-carrying) frame only after all its others were acknowledged:
  // once this payload is in place, the whole transfer has landed.
  if (rx_has_notice_) {
    if (rx_region_->CheckRange(rx_notice_.offset, rx_notice_.length, "landed").ok()) {
      sink.OnLanded(Landing{std::move(rx_region_), link_.peer_name(), rx_notice_, absl::Now()});
    } else {
      link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
    }
  }
  rx_region_.reset();
}

// Our READ's payload is in: it is done, unless this side could not place it
// (rx_refusal_) or the peer's memory failed under it (its verdict); a
// verified one whose table comes later ends with its SUMS frame.
void TcpLane::FinishReadResponse(CompletionSink& sink) {
  const absl::Status outcome = ReadOutcome();
  if (rx_frame_.flags & kFlagSumsLater) {
    AwaitSums(slot(acked_ + ++rx_awaiting_sums_), outcome);
    return;
  }
  const TxSlot& s = slot(++acked_);
  if (!outcome.ok()) {
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &outcome});
    return;
  }
  if (s.checksums != nullptr) {
    FinishVerifiedRead(s, sink);
    return;
  }
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr});
}

// How the READ_RESP just received ended for us; its bytes are counted
// received when it landed.
absl::Status TcpLane::ReadOutcome() {
  if (!rx_refusal_.ok()) return rx_refusal_;
  if (!rx_verdict_.ok()) {
    return absl::Status(
        rx_verdict_.code(),
        absl::StrCat("peer ", link_.peer().node_id, " failed the read: ", rx_verdict_.message()));
  }
  link_.counters().bytes_received.fetch_add(rx_frame_.length, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status TcpLane::HandleAck(uint64_t seq, CompletionSink& sink) {
  if (seq <= acked_ || seq > sent_) {
    return ProtocolError(
        absl::StrCat("ACK ", seq, " outside the unacknowledged range (", acked_, ", ", sent_, "]"));
  }
  uint64_t bytes = 0;
  while (acked_ < seq) {
    const TxSlot& s = slot(acked_ + 1);
    if (s.kind != OpKind::kWrite) return ProtocolError("ACK covers a read not answered");
    ++acked_;
    // A frame we poisoned (our memory faulted under it) fails, acknowledged.
    if (!s.fault.ok()) {
      sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &s.fault});
      continue;
    }
    bytes += s.payload_len;
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr});
  }
  link_.counters().bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status TcpLane::HandleNack(CompletionSink& sink) {
  rx_state_ = RxState::kHeader;
  rx_have_ = 0;
  rx_want_ = kHeaderBytes;
  // The peer answers every earlier frame before it refuses one.
  if (rx_frame_.seq != acked_ + 1 || rx_frame_.seq > sent_) {
    return ProtocolError(
        absl::StrCat("NACK ", rx_frame_.seq, " is not the oldest frame in flight"));
  }
  const auto code = static_cast<absl::StatusCode>(rx_frame_.word);
  const TxSlot& s = slot(++acked_);
  const absl::Status error(
      code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
      absl::StrCat("peer ", link_.peer().node_id, " refused the ",
                   s.kind == OpKind::kWrite ? "write" : "read", ": ", rx_nack_text_));
  // A frame we poisoned fails for that first, whatever the peer says.
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, s.fault.ok() ? &error : &s.fault});
  return absl::OkStatus();
}

}  // namespace xferd::transport::tcp
