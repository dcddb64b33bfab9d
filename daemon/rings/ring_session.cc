// RingSession: taking submissions on the poller, writing completions from
// wherever transfers end, and the doorbells both ways.
#include "daemon/rings/ring_session.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"

namespace xferd::rings {
namespace {

// Entries taken per pass: one client cannot keep its poller from the rest
// of its work for long.
constexpr uint32_t kTakeBatch = 32;

uint8_t StateOf(engine::TransferState state) {
  switch (state) {
    case engine::TransferState::kDone:
      return kStateDone;
    case engine::TransferState::kCancelled:
      return kStateCancelled;
    default:
      return kStateFailed;
  }
}

void Ring(int eventfd) {
  const uint64_t one = 1;
  // EAGAIN only when the count is at its maximum: the client wakes anyway.
  (void)!::write(eventfd, &one, sizeof(one));
}

}  // namespace

absl::StatusOr<std::shared_ptr<RingSession>> RingSession::Create(uint64_t id,
                                                                 const RingSizes& sizes,
                                                                 LocalClient client,
                                                                 engine::Engine& engine) {
  absl::StatusOr<std::unique_ptr<RingMemory>> memory = RingMemory::Create(sizes);
  if (!memory.ok()) return memory.status();
  return std::shared_ptr<RingSession>(
      new RingSession(id, *std::move(memory), std::move(client), engine));
}

RingSession::RingSession(uint64_t id, std::unique_ptr<RingMemory> memory, LocalClient client,
                         engine::Engine& engine)
    : id_(id), memory_(std::move(memory)), client_(std::move(client)), engine_(engine) {}

RingSession::~RingSession() = default;

void RingSession::Start() {
  poller_ = engine_.AttachSource(shared_from_this());
  started_.store(true, std::memory_order_release);
}

void RingSession::Close() {
  if (closed_.exchange(true, std::memory_order_acq_rel)) return;
  StoreRelease(memory_->header().closed.value, 1);
  if (started_.load(std::memory_order_acquire)) engine_.DetachSource(poller_, shared_from_this());
  // Its transfers in flight end with it, but those it did not wait for
  // (detached), which run on as a gRPC client's do once it hangs up.
  const uint32_t ended = engine_.EndTransfersWhere(
      [this](const engine::Transfer& t) {
        return t.plan().completion.get() == this && !t.plan().spec.detached;
      },
      absl::CancelledError("the local client's session closed (its socket closed or its "
                           "process ended) with the transfer in flight"));
  spdlog::info("local session {} closed pid={} uid={} client={:?} taken={} refused={} "
               "in_flight_ended={}",
               id_, client_.pid, client_.uid, client_.name, counters_.submitted.load(),
               counters_.refused.load(), ended);
}

uint32_t RingSession::Poll() {
  if (corrupt_ || closed()) return 0;
  Header& h = memory_->header();
  if (idle_) {
    idle_ = false;
    StoreRelease(h.daemon_idle.value, 0);
    uint64_t count;
    (void)!::read(memory_->submit_fd(), &count, sizeof(count));  // a doorbell rung meanwhile
  }
  const uint64_t tail = LoadAcquire(h.sq_tail.value);
  if (tail - sq_head_ > memory_->geometry().sq_entries) {
    Corrupt("its sq_tail is more than a ring ahead of the entries taken, or behind them");
    return 0;
  }
  const uint64_t head = sq_head_;
  for (uint32_t taken = 0; taken < kTakeBatch && sq_head_ != tail && TakeEntry(tail); ++taken) {
  }
  if (sq_head_ == head) return 0;
  StoreRelease(h.sq_head.value, sq_head_);  // slots and arrays free again
  return static_cast<uint32_t>(sq_head_ - head);
}

// The inline slots an entry uses: its ext, unless no ring of this size
// could ever hold them (then it is taken alone, and refused).
uint64_t RingSession::InlineSlots(const Sqe& entry) const {
  return entry.ext <= kMaxExt && entry.ext < memory_->geometry().sq_entries ? entry.ext : 0;
}

bool RingSession::EntryReady(uint64_t tail, Sqe* entry) {
  if (tail == sq_head_) return false;
  const uint64_t mask = memory_->geometry().sq_entries - 1;
  std::memcpy(entry, &memory_->sq()[sq_head_ & mask], sizeof(*entry));
  if (tail - sq_head_ < 1 + InlineSlots(*entry)) return false;  // not all written yet
  return HasCqRoom((entry->flags & kFlagQueuedNotice) != 0 ? 2 : 1);  // else: reap first
}

bool RingSession::TakeEntry(uint64_t tail) {
  Sqe entry;
  if (!EntryReady(tail, &entry)) return false;
  const Geometry& g = memory_->geometry();
  const uint64_t mask = g.sq_entries - 1;
  const uint64_t ext = InlineSlots(entry);
  const bool notice = (entry.flags & kFlagQueuedNotice) != 0;
  cq_reserved_.fetch_add(notice ? 2 : 1, std::memory_order_relaxed);
  std::byte slots[kMaxExt * sizeof(Sqe)];
  for (uint64_t i = 0; i < ext; ++i) {
    std::memcpy(slots + i * sizeof(Sqe), &memory_->sq()[(sq_head_ + 1 + i) & mask], sizeof(Sqe));
  }
  sq_head_ += 1 + ext;
  counters_.submitted.fetch_add(1, std::memory_order_relaxed);
  const EntryArrays arrays{absl::MakeConstSpan(slots, ext * sizeof(Sqe)),
                           absl::MakeConstSpan(memory_->buffer(), g.buffer_bytes)};
  absl::StatusOr<RingRequest> request =
      ext == entry.ext
          ? ReadEntry(entry, arrays, names_)
          : absl::InvalidArgumentError(absl::StrCat("ext is ", int{entry.ext}, ": at most ",
                                                    std::min<uint64_t>(kMaxExt, g.sq_entries - 1),
                                                    " inline slots in a ring of ", g.sq_entries));
  if (!request.ok()) {
    Refuse(entry.user_data, request.status(), notice);
    return true;
  }
  Submit(*std::move(request));
  return true;
}

void RingSession::Submit(RingRequest request) {
  const uint64_t user_data = request.spec.user_data;
  const bool notice = request.queued_notice;
  request.spec.completion = shared_from_this();
  request.spec.poller = static_cast<int32_t>(poller_);
  request.spec.tenant = client_.tenant;
  std::vector<engine::TransferSpec> specs;
  specs.push_back(std::move(request.spec));
  engine_.Submit(std::move(specs), /*batch=*/false,
                 [self = shared_from_this(), user_data, notice](
                     absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>> admitted) {
                   if (!admitted.ok()) {
                     self->Refuse(user_data, admitted.status(), notice);
                   } else if (notice) {
                     self->NoticeQueued(*admitted->front());
                   }
                 });
}

uint64_t RingSession::ClientCqHead() {
  const uint64_t claimed = cq_claimed_.load(std::memory_order_acquire);
  const uint64_t head = LoadAcquire(memory_->header().cq_head.value);
  cq_seen_head_ = std::clamp(head, cq_seen_head_, std::max(cq_seen_head_, claimed));
  return cq_seen_head_;
}

bool RingSession::HasCqRoom(uint32_t n) {
  const uint64_t reserved = cq_reserved_.load(std::memory_order_relaxed);
  return reserved + n - ClientCqHead() <= memory_->geometry().cq_entries;
}

void RingSession::Complete(uint64_t user_data, uint64_t transfer_id, uint8_t state, uint8_t flags,
                           const absl::Status& status, uint64_t bytes, uint64_t length,
                           uint64_t blocks, uint32_t slices, absl::Duration duration,
                           absl::Span<const uint64_t> checksums) {
  if (closed()) return;  // no reader
  const uint64_t pos = cq_claimed_.fetch_add(1, std::memory_order_acq_rel);
  Cqe& c = memory_->cq()[pos & (memory_->geometry().cq_entries - 1)];
  c.user_data = user_data;
  c.transfer_id = transfer_id;
  c.bytes_done = bytes;
  c.blocks = static_cast<uint32_t>(blocks);
  c.slices = slices;
  c.code = static_cast<uint32_t>(status.code());
  c.state = state;
  c.flags = flags;
  c.duration_ns = static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(duration)));
  c.length = length;
  char* slot = memory_->message(pos);
  if (!checksums.empty()) {  // in place of a message (kCqeChecksums): the status is OK
    std::memcpy(slot, checksums.data(), checksums.size() * sizeof(uint64_t));
    c.message_bytes = static_cast<uint16_t>(checksums.size() * sizeof(uint64_t));
  } else {
    const absl::string_view message = status.message();
    const size_t kept = std::min(message.size(), kMessageBytes);
    if (kept > 0) std::memcpy(slot, message.data(), kept);  // an OK status's data() is null
    if (kept < message.size()) std::memcpy(slot + kept - 3, "...", 3);  // cut
    c.message_bytes = static_cast<uint16_t>(kept);
  }
  StoreRelease(c.seq, pos + 1);
  counters_.completed.fetch_add(1, std::memory_order_relaxed);
  FullFence();  // the seq before the client's flag (its side: the flag, then the seq)
  if (LoadAcquire(memory_->header().client_waits.value) != 0) Ring(memory_->complete_fd());
}

void RingSession::Refuse(uint64_t user_data, const absl::Status& status, bool unreserve_notice) {
  counters_.refused.fetch_add(1, std::memory_order_relaxed);
  if (unreserve_notice) cq_reserved_.fetch_sub(1, std::memory_order_relaxed);
  Complete(user_data, 0, kStateFailed, 0, status, 0, 0, 0, 0, absl::ZeroDuration());
}

void RingSession::NoticeQueued(const engine::Transfer& t) {
  // Ended already: its completion is written (or being written); the notice
  // would only follow it.
  if (engine::IsTerminal(t.state())) {
    cq_reserved_.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
  Complete(t.plan().spec.user_data, t.id(), kStateQueued, kCqeMore, absl::OkStatus(), 0,
           t.bytes(), t.plan().spec.request_blocks, t.ops(), absl::ZeroDuration());
}

void RingSession::OnTransferEnded(const engine::Transfer& t) {
  uint8_t flags = 0;
  absl::Span<const uint64_t> checksums;
  if (t.checksums() != nullptr) {
    flags |= kCqeVerified;
    // Done: every op completed and their checksums are in (Transfer::Info).
    const std::vector<uint64_t>& sums = *t.checksums()->shared();
    if (t.state() == engine::TransferState::kDone && !sums.empty() &&
        sums.size() * sizeof(uint64_t) <= kMessageBytes) {
      flags |= kCqeChecksums;
      checksums = sums;
    }
  }
  Complete(t.plan().spec.user_data, t.id(), StateOf(t.state()), flags, t.end_error(), t.end_bytes(),
           t.bytes(), t.plan().spec.request_blocks, t.ops(), t.finished_at() - t.submitted_at(),
           checksums);
}

bool RingSession::PrepareToSleep() {
  if (corrupt_ || closed()) return true;
  StoreRelease(memory_->header().daemon_idle.value, 1);
  idle_ = true;
  FullFence();  // the flag before the client's words (its side: its words, then the flag)
  // An entry waiting is work only once it is whole and the CQ has room for
  // its answers; otherwise the client rings when it writes or reaps more.
  Sqe entry;
  return !EntryReady(LoadAcquire(memory_->header().sq_tail.value), &entry);
}

void RingSession::Corrupt(const char* why) {
  corrupt_ = true;
  StoreRelease(memory_->header().closed.value, 2);
  spdlog::warn("local session {} (pid {} uid {}) broke its ring: {}; it is no longer served",
               id_, client_.pid, client_.uid, why);
}

}  // namespace xferd::rings
