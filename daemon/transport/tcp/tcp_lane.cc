#include "daemon/transport/tcp/tcp_lane.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"

namespace xferd::transport::tcp {
namespace {

// iovecs per writev: enough to batch a lane's worth of small frames.
constexpr size_t kMaxIov = 64;
// Frames handled per OnReadable call before yielding to other lanes, so one
// busy peer cannot starve the rest of a poller's lanes.
constexpr uint32_t kReadBudgetFrames = 256;
// Control bytes (ACK/NACK) owed to a peer that does not read them; beyond
// this the peer is misbehaving and the lane is dropped.
constexpr size_t kMaxControlBacklog = 1 << 20;

bool WouldBlock(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

}  // namespace

TcpLane::TcpLane(Link& link, const memory::RegionRegistry& regions, uint32_t depth)
    : link_(link), regions_(regions), tx_ring_(depth) {
  control_.reserve(4096);
}

TcpLane::~TcpLane() = default;

uint32_t TcpLane::credits() const {
  if (!fd_.valid() || broken()) return 0;
  return static_cast<uint32_t>(tx_ring_.size() - (posted_ - acked_));
}

void TcpLane::Attach(UniqueFd fd) {
  XFERD_CHECK(!fd_.valid());
  fd_ = std::move(fd);
}

uint32_t TcpLane::Post(absl::Span<const DataOp> ops) {
  const uint32_t n = std::min<uint32_t>(credits(), static_cast<uint32_t>(ops.size()));
  for (uint32_t i = 0; i < n; ++i) {
    const DataOp& op = ops[i];
    XFERD_DCHECK(op.kind == OpKind::kWrite && op.block_count == 1);
    const Block& block = op.blocks[0];
    const uint64_t seq = ++posted_;
    TxSlot& s = slot(seq);
    s.cookie = op.cookie;
    s.payload = op.local_base + block.local_offset;
    s.payload_len = op.length;
    FrameHeader header;
    header.type = FrameType::kWrite;
    header.flags = op.notice != nullptr ? kFlagNotice : 0;
    header.word = op.remote->region_id;
    header.length = op.length;
    header.offset = block.remote_offset;
    header.seq = seq;
    EncodeHeader(header, s.header);
    s.header_len = kHeaderBytes;
    if (op.notice != nullptr) {
      EncodeNotice(*op.notice, s.header + kHeaderBytes);
      s.header_len += kNoticeBytes;
    }
  }
  if (n > 0) {
    // A send error is seen again, and reported, by the next Flush/OnReadable.
    (void)Flush();
  }
  return n;
}

// Order on the wire: the rest of a half-sent frame, then control frames (which
// may only go between frames), then the following frames.
size_t TcpLane::BuildIov(iovec* iov, size_t max_iov) {
  size_t count = 0;
  uint64_t seq = sent_ + 1;
  auto add_frame = [&](uint64_t frame_seq, size_t offset) {
    TxSlot& s = slot(frame_seq);
    if (offset < s.header_len) {
      iov[count++] = {s.header + offset, s.header_len - offset};
      offset = s.header_len;
    }
    iov[count++] = {const_cast<std::byte*>(s.payload) + (offset - s.header_len),
                    s.payload_len - (offset - s.header_len)};
  };
  if (send_offset_ > 0) add_frame(seq++, send_offset_);
  if (control_sent_ < control_.size()) {
    iov[count++] = {control_.data() + control_sent_, control_.size() - control_sent_};
  }
  while (seq <= posted_ && count + 2 <= max_iov) add_frame(seq++, 0);
  return count;
}

// Advances the send cursors over `bytes` just written, in BuildIov's order.
void TcpLane::Consume(size_t bytes) {
  auto consume_frame = [&]() -> bool {
    const TxSlot& s = slot(sent_ + 1);
    const size_t left = s.header_len + s.payload_len - send_offset_;
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
  if (control_sent_ < control_.size()) {
    const size_t take = std::min(bytes, control_.size() - control_sent_);
    control_sent_ += take;
    bytes -= take;
    if (control_sent_ < control_.size()) return;
    control_.clear();
    control_sent_ = 0;
  }
  while (bytes > 0 && sent_ < posted_ && consume_frame()) {
  }
}

absl::Status TcpLane::Flush() {
  if (!fd_.valid() || !error_.ok()) return error_;
  iovec iov[kMaxIov];
  for (;;) {
    const size_t count = BuildIov(iov, kMaxIov);
    if (count == 0) {
      wants_writable_ = false;
      return absl::OkStatus();
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (WouldBlock(errno)) {
        wants_writable_ = true;
        return absl::OkStatus();
      }
      return Fail(absl::UnavailableError(
          absl::StrCat("lane to ", link_.peer().node_id, " failed: send: ", std::strerror(errno))));
    }
    Consume(static_cast<size_t>(n));
  }
}

absl::Status TcpLane::ProtocolError(absl::string_view what) const {
  return absl::UnavailableError(
      absl::StrCat("protocol error on lane from ", link_.peer().node_id, ": ", what));
}

absl::Status TcpLane::OnReadable(CompletionSink& sink, absl::Span<std::byte> scratch,
                                 uint32_t* events) {
  if (!fd_.valid() || !error_.ok()) return error_;
  absl::Status status;
  uint32_t frames = 0;
  while (status.ok() && frames < kReadBudgetFrames) {
    ssize_t n = 0;
    switch (rx_state_) {
      case RxState::kHeader:
      case RxState::kNotice: {
        const size_t want =
            kHeaderBytes + (rx_state_ == RxState::kNotice ? kNoticeBytes : 0) - rx_have_;
        if (want > 0) n = ::recv(fd_.get(), rx_header_ + rx_have_, want, 0);
        if (n > 0) rx_have_ += static_cast<size_t>(n);
        if (want == 0 || static_cast<size_t>(n) == want) {
          ++frames;
          status = OnHeader(sink);
          continue;
        }
        break;
      }
      case RxState::kPayload: {
        // The payload goes straight into the region; the next frame's header
        // comes in with it when available, saving a syscall per frame.
        iovec iov[2] = {{rx_dst_, rx_left_}, {rx_header_, kHeaderBytes}};
        n = ::readv(fd_.get(), iov, 2);
        if (n <= 0) break;
        const size_t got = static_cast<size_t>(n);
        if (got < rx_left_) {
          rx_dst_ += got;
          rx_left_ -= static_cast<uint32_t>(got);
          continue;
        }
        rx_have_ = got - rx_left_;
        rx_left_ = 0;
        FinishWritePayload();
        continue;
      }
      case RxState::kDiscard: {
        n = ::recv(fd_.get(), scratch.data(), std::min<size_t>(rx_left_, scratch.size()), 0);
        if (n <= 0) break;
        rx_left_ -= static_cast<uint32_t>(n);
        if (rx_left_ == 0) rx_state_ = RxState::kHeader;
        continue;
      }
      case RxState::kNackText: {
        const size_t want = rx_frame_.length - rx_nack_text_.size();
        char buf[kMaxNackMessage];
        if (want > 0) n = ::recv(fd_.get(), buf, want, 0);
        if (n > 0) rx_nack_text_.append(buf, static_cast<size_t>(n));
        if (rx_nack_text_.size() == rx_frame_.length) {
          status = HandleNack(sink);
          continue;
        }
        break;
      }
    }
    if (n == 0) {
      status = absl::UnavailableError(
          absl::StrCat("peer ", link_.peer().node_id, " closed the data connection"));
    } else if (n < 0 && !WouldBlock(errno)) {
      status = absl::UnavailableError(absl::StrCat("lane to ", link_.peer().node_id,
                                                   " failed: receive: ", std::strerror(errno)));
    } else {
      break;  // drained
    }
  }
  *events += frames;
  if (!status.ok()) return Fail(std::move(status));
  QueueAck();
  if (control_.size() > kMaxControlBacklog) {
    return Fail(ProtocolError("peer does not read its acknowledgements"));
  }
  return Flush();
}

absl::Status TcpLane::OnHeader(CompletionSink& sink) {
  if (rx_state_ == RxState::kNotice) {  // header decoded earlier, notice now complete
    StartWritePayload();
    return absl::OkStatus();
  }
  if (absl::Status s = DecodeHeader(rx_header_, &rx_frame_); !s.ok()) {
    return ProtocolError(s.message());
  }
  rx_have_ = 0;
  switch (rx_frame_.type) {
    case FrameType::kWrite:
      if (rx_frame_.seq != rx_last_seq_ + 1) return ProtocolError("WRITE out of sequence");
      rx_last_seq_ = rx_frame_.seq;
      if (rx_frame_.flags & kFlagNotice) {
        rx_state_ = RxState::kNotice;
        rx_have_ = kHeaderBytes;  // the header stays in place; the notice follows it
        return absl::OkStatus();
      }
      StartWritePayload();
      return absl::OkStatus();
    case FrameType::kAck:
      return HandleAck(rx_frame_.seq, sink);
    case FrameType::kNack:
      rx_nack_text_.clear();
      rx_state_ = RxState::kNackText;
      if (rx_frame_.length == 0) return HandleNack(sink);
      return absl::OkStatus();
    default:
      return ProtocolError("unexpected HELLO on an attached lane");
  }
}

// Validates an inbound WRITE against the region it names; accepted payload is
// received into the region, refused payload is drained and NACKed.
void TcpLane::StartWritePayload() {
  rx_have_ = 0;
  const FrameHeader& f = rx_frame_;
  std::shared_ptr<memory::Region> region = regions_.FindById(f.word);
  absl::Status verdict;
  if (region == nullptr) {
    verdict = absl::NotFoundError(absl::StrCat(
        "region id ", f.word, " is not registered (deregistered since it was resolved?)"));
  } else if (!region->PeerAllowed(link_.peer().node_id)) {
    verdict = absl::PermissionDeniedError(absl::StrCat(
        "node '", link_.peer().node_id, "' is not in the ACL of region '", region->name(), "'"));
  } else if (!region->access().remote_write) {
    verdict = absl::PermissionDeniedError(
        absl::StrCat("region '", region->name(), "' does not allow remote writes"));
  } else {
    verdict = region->CheckRange(f.offset, f.length, "destination");
  }
  if (!verdict.ok()) {
    link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
    SPDLOG_DEBUG("refused WRITE seq={} from {}: {}", f.seq, link_.peer().node_id,
                 verdict.message());
    QueueNack(f.seq, verdict);
    rx_left_ = f.length;
    rx_state_ = RxState::kDiscard;
    return;
  }
  rx_has_notice_ = (f.flags & kFlagNotice) != 0;
  if (rx_has_notice_) rx_notice_ = DecodeNotice(rx_header_ + kHeaderBytes);
  rx_dst_ = region->data() + f.offset;
  rx_left_ = f.length;
  rx_region_ = std::move(region);
  rx_state_ = RxState::kPayload;
}

void TcpLane::FinishWritePayload() {
  link_.counters().bytes_received.fetch_add(rx_frame_.length, std::memory_order_relaxed);
  ack_pending_ = rx_frame_.seq;
  // Frames of one lane land in order, and the sender sends a transfer's final
  // (notice-carrying) slice only after all its other slices were
  // acknowledged: once this payload is in place, the whole range has landed.
  if (rx_has_notice_) {
    if (rx_region_->CheckRange(rx_notice_.offset, rx_notice_.length, "landed").ok()) {
      rx_region_->landed().Publish(memory::LandedEvent{rx_notice_.offset, rx_notice_.length,
                                                       link_.peer().node_id, rx_notice_.transfer_id,
                                                       0, absl::Now()});
    } else {
      link_.counters().writes_rejected.fetch_add(1, std::memory_order_relaxed);
    }
  }
  rx_region_.reset();
  rx_state_ = RxState::kHeader;
}

absl::Status TcpLane::HandleAck(uint64_t seq, CompletionSink& sink) {
  if (seq <= acked_ || seq > sent_) {
    return ProtocolError(
        absl::StrCat("ACK ", seq, " outside the unacknowledged range (", acked_, ", ", sent_, "]"));
  }
  uint64_t bytes = 0;
  while (acked_ < seq) {
    const TxSlot& s = slot(++acked_);
    bytes += s.payload_len;
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, nullptr});
  }
  link_.counters().bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status TcpLane::HandleNack(CompletionSink& sink) {
  rx_state_ = RxState::kHeader;
  // The peer acknowledges every earlier frame before it refuses one.
  if (rx_frame_.seq != acked_ + 1 || rx_frame_.seq > sent_) {
    return ProtocolError(
        absl::StrCat("NACK ", rx_frame_.seq, " is not the oldest write in flight"));
  }
  const auto code = static_cast<absl::StatusCode>(rx_frame_.word);
  const absl::Status error(
      code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
      absl::StrCat("peer ", link_.peer().node_id, " refused the write: ", rx_nack_text_));
  const TxSlot& s = slot(++acked_);
  sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &error});
  return absl::OkStatus();
}

void TcpLane::QueueAck() {
  if (ack_pending_ == ack_sent_) return;
  FrameHeader ack;
  ack.type = FrameType::kAck;
  ack.seq = ack_pending_;
  uint8_t bytes[kHeaderBytes];
  EncodeHeader(ack, bytes);
  control_.append(reinterpret_cast<const char*>(bytes), kHeaderBytes);
  ack_sent_ = ack_pending_;
}

void TcpLane::QueueNack(uint64_t seq, const absl::Status& why) {
  QueueAck();  // everything before the refused frame is acknowledged first
  ack_pending_ = ack_sent_ = seq;
  const absl::string_view text = why.message().substr(0, kMaxNackMessage);
  FrameHeader nack;
  nack.type = FrameType::kNack;
  nack.word = static_cast<uint32_t>(why.code());
  nack.length = static_cast<uint32_t>(text.size());
  nack.seq = seq;
  uint8_t bytes[kHeaderBytes];
  EncodeHeader(nack, bytes);
  control_.append(reinterpret_cast<const char*>(bytes), kHeaderBytes);
  control_.append(text.data(), text.size());
}

absl::Status TcpLane::Fail(absl::Status error) {
  if (error_.ok()) error_ = std::move(error);
  return error_;
}

void TcpLane::Detach(const absl::Status& error, CompletionSink& sink) {
  (void)Fail(error);
  while (acked_ < posted_) {
    const TxSlot& s = slot(++acked_);
    sink.OnOpDone(OpCompletion{s.cookie, s.payload_len, &error});
  }
  sent_ = posted_;
  send_offset_ = 0;
  control_.clear();
  control_sent_ = 0;
  rx_region_.reset();
  fd_.reset();
}

}  // namespace xferd::transport::tcp
