#include "daemon/engine/transfer.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/engine/block_plan.h"
#include "daemon/engine/landed_ranges.h"
#include "daemon/engine/peer.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verified_op.h"

namespace xferd::engine {
namespace {

uint64_t TotalBytes(absl::Span<const transport::Block> blocks) {
  uint64_t bytes = 0;
  for (const transport::Block& b : blocks) bytes += b.length;
  return bytes;
}

// What the receiver of a write (or the reader itself) announces: the span
// from the lowest to the highest byte the transfer places, on the side
// `remote` (a write's destination) or local (a read's), and the request's
// block count (as Transfer.blocks: not the blocks planning merged or split).
transport::LandingNotice MakeNotice(uint64_t id, absl::Span<const transport::Block> blocks,
                                    bool remote, uint64_t request_blocks, uint64_t bytes) {
  uint64_t low = UINT64_MAX;
  uint64_t high = 0;
  for (const transport::Block& b : blocks) {
    const uint64_t offset = remote ? b.remote_offset : b.local_offset;
    low = std::min(low, offset);
    high = std::max(high, offset + b.length);
  }
  return transport::LandingNotice{id, low, high - low, request_blocks, bytes};
}

}  // namespace

const char* TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kQueued:
      return "queued";
    case TransferState::kRunning:
      return "running";
    case TransferState::kDone:
      return "done";
    case TransferState::kFailed:
      return "failed";
    case TransferState::kCancelled:
      return "cancelled";
  }
  return "?";
}

Transfer::Transfer(Plan plan, TransferListener* listener)
    : blocks_(std::move(plan.blocks)),
      op_starts_(GroupOps(blocks_, plan.slice_size)),
      bytes_(TotalBytes(blocks_)),
      plan_(std::move(plan)),
      submitted_at_(plan_.submitted_at),
      deadline_(plan_.spec.timeout == absl::InfiniteDuration()
                    ? absl::InfiniteFuture()
                    : submitted_at_ + plan_.spec.timeout),
      notice_(MakeNotice(plan_.id, blocks_, has_final(), plan_.spec.request_blocks, bytes_)),
      listener_(listener),
      checksums_(plan_.spec.verify.value_or(false)
                     ? std::make_unique<TransferChecksums>(blocks_.size())
                     : nullptr) {
  XFERD_CHECK(!blocks_.empty() && plan_.slice_size > 0 && ops() >= 1);
  plan_.local->AddUser();
}

Transfer::~Transfer() {
  // A transfer dropped without an outcome (a batch refused after planning)
  // still releases its local region.
  if (!IsTerminal(state())) plan_.local->RemoveUser();
}

uint32_t Transfer::OnBulkDone(uint32_t bytes) {
  bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
  return bulk_done_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void Transfer::OnFinalDone(uint32_t bytes) {
  bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
  Conclude();
}

void Transfer::OnReadDone() { Conclude(); }

void Transfer::Conclude() {
  if (plan_.verify_at_peer && listener_ != nullptr && listener_->VerifyAtPeer(*this)) return;
  FinishVerified();
}

void Transfer::FinishVerified() {
  if (checksums_ == nullptr) {
    Finish(TransferState::kDone, absl::OkStatus());
    return;
  }
  if (FailIfCorrupt()) return;
  absl::Status error = plan_.expected_checksums != nullptr
                           ? checksums_->ExpectedError(blocks_, *plan_.expected_checksums)
                           : absl::OkStatus();
  const TransferState end = error.ok() ? TransferState::kDone : TransferState::kFailed;
  Finish(end, std::move(error));
}

bool Transfer::FailIfCorrupt() {
  if (!corrupt()) return false;
  Finish(TransferState::kFailed,
         checksums_->MismatchError(blocks_, plan_.kind == transport::OpKind::kRead));
  return true;
}

void Transfer::PublishReadLanded() {
  memory::LandedEvent event{notice_.offset, notice_.length, plan_.peer->node_id(), plan_.id, 0,
                            absl::Now()};
  event.blocks = notice_.blocks;
  event.bytes = notice_.bytes;
  event.read = true;
  // The reader planned the blocks: their local ranges are at hand.
  if (plan_.local->spec().landed_ranges && notice_.blocks > 1) {
    event.ranges = PackRanges(blocks_, /*remote=*/false);
  }
  plan_.local->landed().Publish(std::move(event));
}

void Transfer::MakeOp(uint32_t index, bool final, transport::DataOp* op) {
  const uint32_t first = op_starts_[index];
  const uint32_t count = op_starts_[index + 1] - first;
  uint32_t length = 0;
  for (uint32_t i = first; i < first + count; ++i) length += blocks_[i].length;
  op->cookie = MakeCookie(this, final);
  op->kind = plan_.kind;
  op->local_base = plan_.local->data();
  op->local_registration = plan_.local->registration();
  op->local_region = plan_.local.get();
  op->remote = &plan_.remote;
  op->blocks = blocks_.data() + first;
  op->block_count = count;
  op->length = length;
  // Checked at the peer, a write lands when that check finds it whole.
  op->notice = final && !plan_.verify_at_peer ? &notice_ : nullptr;
  op->checksums = nullptr;
  if (checksums_ == nullptr) return;
  uint64_t* sums = checksums_->data() + first;
  if (!plan_.verify_at_peer) {
    op->checksums = sums;  // the transport takes and checks them
    return;
  }
  // Over verbs the CPU never touches a write's bytes: their checksums are
  // taken here, as the op goes (a read's come from the peer's check).
  if (plan_.kind != transport::OpKind::kWrite) return;
  iovec pieces[transport::kMaxBlocksPerOp];
  for (uint32_t i = 0; i < count; ++i) {
    pieces[i] = {plan_.local->data() + blocks_[first + i].local_offset, blocks_[first + i].length};
  }
  transport::TakeChecksums(plan_.local.get(), pieces, count, sums);
}

void Transfer::MarkRunning() {
  if (state_.load(std::memory_order_relaxed) != TransferState::kQueued) return;
  TransferState expected = TransferState::kQueued;
  if (state_.compare_exchange_strong(expected, TransferState::kRunning,
                                     std::memory_order_acq_rel)) {
    started_ns_.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed);
  }
}

absl::Time Transfer::started_at() const {
  const int64_t ns = started_ns_.load(std::memory_order_relaxed);
  return ns == 0 ? absl::InfinitePast() : absl::FromUnixNanos(ns);
}

bool Transfer::Finish(TransferState terminal, absl::Status error) {
  XFERD_DCHECK(IsTerminal(terminal));
  // Looked into once, by the listener, which ends the transfer with what it
  // found; the same failure of its other ops returns at once meanwhile.
  if (terminal == TransferState::kFailed && listener_ != nullptr &&
      transport::IsAccessRefused(error)) {
    if (explaining_.exchange(true, std::memory_order_acq_rel)) return false;
    if (listener_->ExplainFailure(*this, error)) return false;
  }
  if (ending_.exchange(true, std::memory_order_acq_rel)) return false;
  error_ = std::move(error);
  finished_at_ = absl::Now();
  // Writes still in flight may be acknowledged after this; the transfer's
  // outcome reports what was done when it ended.
  final_bytes_ = bytes_done_.load(std::memory_order_relaxed);
  // Counted, and the local region let go, before anyone can see the end: a
  // client told "done" may look at the stats or deregister the region next.
  plan_.local->RemoveUser();
  if (listener_ != nullptr) listener_->OnTransferEnding(*this, terminal, error_.code());
  state_.store(terminal, std::memory_order_release);
  // A read done is told after its landed event is out (Announce), so a
  // client told "done" finds the event on its region watch, as over gRPC.
  const bool after_landing =
      terminal == TransferState::kDone && plan_.kind == transport::OpKind::kRead;
  if (plan_.completion != nullptr && !after_landing) plan_.completion->OnTransferEnded(*this);
  if (listener_ != nullptr) listener_->OnTransferEnded(*this);
  return true;
}

void Transfer::AwaitEnd() const {
  // The winner publishes within a few instructions of its decision; a
  // failure being explained ends once the peer answers the executor's ping.
  while (!IsTerminal(state())) {
    if (explaining_.load(std::memory_order_acquire)) {
      absl::SleepFor(absl::Milliseconds(1));
    } else {
      std::this_thread::yield();
    }
  }
}

void Transfer::Announce(const TransferInfo& outcome) {
  // A read's landed event is raised only for a read that ended done: one
  // cancelled or failed while its last op completes raises none. Raised
  // before the observers hear of the end, so a client that a reply told
  // "done" also finds the event on its region watch.
  if (outcome.state == TransferState::kDone && plan_.kind == transport::OpKind::kRead) {
    PublishReadLanded();
    if (plan_.completion != nullptr) plan_.completion->OnTransferEnded(*this);
  }
  std::vector<Observer> observers;
  {
    MutexLock lock(&observers_mu_);
    observers.swap(observers_);
  }
  for (Observer& observer : observers) observer(outcome);
  announced_.store(true, std::memory_order_release);
}

bool Transfer::AddObserver(Observer observer) {
  // Before the state is looked at: an end decided meanwhile most likely
  // sees it and has its notes taken at once (else within Notes' bound).
  observed_.store(true, std::memory_order_release);
  MutexLock lock(&observers_mu_);
  if (IsTerminal(state())) return false;
  observers_.push_back(std::move(observer));
  return true;
}

TransferInfo Transfer::Info() const {
  TransferInfo info = Describe();
  info.state = state();
  if (!IsTerminal(info.state)) {
    info.bytes_done = bytes_done_.load(std::memory_order_relaxed);
    return info;
  }
  info.bytes_done = final_bytes_;
  info.error = error_;
  info.finished_at = finished_at_;
  // Done: every op completed, and their checksums are in (the ops' ends
  // happen before the end that the state's acquire sees).
  if (checksums_ != nullptr && info.state == TransferState::kDone) {
    info.checksums = checksums_->shared();
  }
  return info;
}

TransferInfo Transfer::Describe() const {
  TransferInfo info;
  info.id = plan_.id;
  info.batch_id = plan_.batch_id;
  info.spec = plan_.spec;
  info.peer_node = plan_.peer->node_id();
  info.transport = plan_.transport;
  info.slice_size = plan_.slice_size;
  info.slices = ops();
  info.submitted_at = submitted_at_;
  info.started_at = started_at();
  return info;
}

}  // namespace xferd::engine
