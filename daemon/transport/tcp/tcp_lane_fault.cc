// TcpLane, memory that faults under a copy: a file region whose file another
// process truncated (memory and SHM regions cannot lose a page). The kernel
// reports such a page to the socket calls as EFAULT, and the lane's guarded
// copies (TLS in user space) as a short copy. Only the frame that touched it
// fails, with the region's status (Region::MarkLost), and the region is
// marked broken; the stream stays in step and the lane carries on.
//
// Sending: the header already announced the payload, so the rest of it goes
// from a page of zeros and the frame's verdict (tcp_frame.h) says it failed:
// the receiver neither lands it nor reports it as good, and our op (or the
// peer's read) fails. Receiving: the rest of the payload is drained, and the
// frame fails (a WRITE with a NACK naming the region, our READ locally).
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/memory/guarded_copy.h"
#include "daemon/transport/tcp/tcp_lane.h"

namespace xferd::transport::tcp {
namespace {

// Read-only zeros: a poisoned payload's rest, and a good verdict (code 0,
// no message). 64 KiB: a 16 MiB payload is 256 pieces, within one batch.
constexpr size_t kZeroBytes = 64 << 10;
const std::byte kZeros[kZeroBytes] = {};
static_assert(kZeroBytes >= kVerdictBytes);

}  // namespace

const uint8_t* TcpLane::Trailer(uint32_t zeros_from) const {
  return zeros_from == kNoZeros ? reinterpret_cast<const uint8_t*>(kZeros)
                                : reinterpret_cast<const uint8_t*>(fault_trailer_.data());
}

// One piece of payload at payload position *pos: its memory before
// `zeros_from`, zeros after.
void TcpLane::AddPayloadPiece(IovOut& out, const void* data, size_t len, uint64_t* pos,
                              uint32_t zeros_from) {
  const uint64_t start = *pos;
  *pos += len;
  if (zeros_from >= start + len) {
    out.Add(data, len);
    return;
  }
  const size_t kept = zeros_from > start ? zeros_from - start : 0;
  if (kept > 0) out.Add(data, kept);
  for (size_t rest = len - kept; rest > 0;) {
    const size_t take = std::min(rest, kZeroBytes);
    out.Add(kZeros, take);
    rest -= take;
  }
}

// A send failed with EFAULT: a page of some piece of the batch is gone. The
// piece at the cursor alone either goes (the loop goes on) or is the one.
// Returns bytes to consume (0 after poisoning it), or -1 with errno.
ssize_t TcpLane::OnSendFault(iovec* iov, size_t count, Guarded guarded) {
  if (count > 1) {
    const ssize_t n = Send(iov, 1, guarded);
    if (n >= 0 || errno != EFAULT) return n;
  }
  if (!PoisonAtCursor()) {
    errno = EFAULT;  // memory that cannot fault did: the lane fails as before
    return -1;
  }
  return 0;
}

// The frame or answer at the send cursor faulted in its payload: zeros from
// there, and a failed verdict. False if it has no verdict to say so (its
// memory was not supposed to fault).
bool TcpLane::PoisonAtCursor() {
  Payload* payload = nullptr;
  size_t offset = 0;  // of the cursor in the payload
  absl::Status fault;
  if (send_offset_ > 0) {
    TxSlot& s = slot(sent_ + 1);
    if (!s.payload.guarded || send_offset_ < s.header_len) return false;
    s.fault = s.region->MarkLost();
    fault = s.fault;
    payload = &s.payload;
    offset = send_offset_ - s.header_len;
  } else if (answers_sent_ < answers_queued_) {
    Answer& a = answers_[(answers_sent_ + 1) % answers_.size()];
    if (!a.payload.guarded || answer_offset_ < a.len) return false;
    fault = a.region->MarkLost();
    payload = &a.payload;
    offset = answer_offset_ - a.len;
  } else {
    return false;  // a frame's header: our own memory
  }
  payload->zeros_from = static_cast<uint32_t>(offset);
  fault_trailer_ = EncodeVerdict(fault);
  payload->trailer_len = static_cast<uint32_t>(fault_trailer_.size());
  SPDLOG_DEBUG("lane to {}: {}", link_.peer().node_id, fault.message());
  return true;
}

// TLS into memory that can fault: OpenSSL decrypts into `bounce`, and a
// guarded copy places the bytes. Returns the bytes taken from the stream;
// rx_fault_ when some could not be placed.
ssize_t TcpLane::ReadGuarded(const iovec* iov, uint32_t count, absl::Span<std::byte> bounce) {
  size_t want = 0;
  for (uint32_t i = 0; i < count; ++i) want += iov[i].iov_len;
  const ssize_t n = RecvSome(bounce.data(), std::min(want, bounce.size()));
  if (n <= 0) return n;
  iovec to[kMaxBlocksPerOp];
  uint32_t pieces = 0;
  for (size_t left = static_cast<size_t>(n); left > 0; ++pieces) {
    to[pieces] = {iov[pieces].iov_base, std::min(left, iov[pieces].iov_len)};
    left -= to[pieces].iov_len;
  }
  const iovec from{bounce.data(), static_cast<size_t>(n)};
  if (memory::GuardedCopy(to, pieces, &from, 1) != n) rx_fault_ = true;
  return n;
}

// A payload could not be placed (`err`: EFAULT from the socket, or 0 for a
// short guarded copy): the region lost memory. The rest is drained and the
// frame fails; memory that was not supposed to fault breaks the lane.
absl::Status TcpLane::OnPlaceFault(CompletionSink& sink, int err, ssize_t* n) {
  memory::Region* region = rx_is_read_resp_ ? slot(acked_ + 1).region : rx_region_.get();
  if (region == nullptr || !region->can_lose_memory()) {
    return absl::UnavailableError(absl::StrCat("lane to ", link_.peer().node_id,
                                               " failed: receive: ", RecvError(err)));
  }
  rx_fault_ = false;
  rx_refusal_ = region->MarkLost();
  if (!rx_is_read_resp_) rx_region_.reset();
  SPDLOG_DEBUG("lane to {}: {}", link_.peer().node_id, rx_refusal_.message());
  uint64_t left = 0;
  for (uint32_t i = rx_iov_next_; i < rx_iov_count_; ++i) left += rx_iov_[i].iov_len;
  left -= rx_iov_done_;
  rx_iov_next_ = rx_iov_count_;
  rx_iov_done_ = 0;
  rx_have_ = 0;
  *n = 1;
  if (left == 0) {
    EndPayload(sink);
  } else {
    rx_left_ = static_cast<uint32_t>(left);
    rx_state_ = RxState::kDiscard;
  }
  return absl::OkStatus();
}

// A frame's verdict is in (rx_header_); its message, if any, follows.
absl::Status TcpLane::OnVerdict(CompletionSink& sink) {
  absl::StatusCode code;
  if (absl::Status s = DecodeVerdict(rx_header_, &code, &rx_text_len_); !s.ok()) {
    return ProtocolError(s.message());
  }
  rx_have_ = 0;
  rx_verdict_ = absl::Status(code, "");
  rx_nack_text_.clear();
  if (rx_text_len_ > 0) {
    rx_state_ = RxState::kText;
    return absl::OkStatus();
  }
  return OnTextDone(sink);
}

}  // namespace xferd::transport::tcp
