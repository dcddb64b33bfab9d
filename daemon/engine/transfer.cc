#include "daemon/engine/transfer.h"

#include "daemon/common/check.h"
#include "daemon/engine/peer.h"

namespace xferd::engine {
namespace {

uint32_t SliceCount(uint64_t length, uint32_t slice_size) {
  return static_cast<uint32_t>((length + slice_size - 1) / slice_size);
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
    : plan_(std::move(plan)),
      slices_(SliceCount(plan_.spec.length, plan_.slice_size)),
      submitted_at_(plan_.submitted_at),
      deadline_(plan_.spec.timeout == absl::InfiniteDuration()
                    ? absl::InfiniteFuture()
                    : submitted_at_ + plan_.spec.timeout),
      notice_{plan_.id, plan_.spec.dst_offset, plan_.spec.length},
      listener_(listener) {
  XFERD_CHECK(plan_.spec.length > 0 && plan_.slice_size > 0 && slices_ >= 1);
  plan_.src->AddUser();
}

Transfer::~Transfer() {
  // A transfer dropped without an outcome (a batch refused after planning)
  // still releases its source region.
  if (!IsTerminal(state())) plan_.src->RemoveUser();
}

uint32_t Transfer::OnBulkDone(uint32_t bytes) {
  bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
  return bulk_done_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void Transfer::OnFinalDone(uint32_t bytes) {
  bytes_done_.fetch_add(bytes, std::memory_order_relaxed);
  Finish(TransferState::kDone, absl::OkStatus());
}

void Transfer::MakeOp(uint32_t index, bool final, transport::WriteOp* op) const {
  const uint64_t begin = uint64_t{index} * plan_.slice_size;
  const uint64_t length = std::min<uint64_t>(plan_.slice_size, plan_.spec.length - begin);
  op->cookie = MakeCookie(this, final);
  op->src = plan_.src->data() + plan_.spec.src_offset + begin;
  op->src_registration = plan_.src->registration();
  op->dst = &plan_.dst;
  op->dst_offset = plan_.spec.dst_offset + begin;
  op->length = static_cast<uint32_t>(length);
  op->notice = final ? &notice_ : nullptr;
}

void Transfer::MarkRunning() {
  TransferState expected = TransferState::kQueued;
  state_.compare_exchange_strong(expected, TransferState::kRunning, std::memory_order_acq_rel);
}

bool Transfer::Finish(TransferState terminal, absl::Status error) {
  XFERD_DCHECK(IsTerminal(terminal));
  std::vector<Observer> observers;
  {
    // The terminal state is published under mu_ with its error and time, so
    // Info() never sees one without the others.
    MutexLock lock(&mu_);
    TransferState current = state_.load(std::memory_order_acquire);
    do {
      if (IsTerminal(current)) return false;
    } while (!state_.compare_exchange_weak(current, terminal, std::memory_order_acq_rel));
    error_ = std::move(error);
    finished_at_ = absl::Now();
    // Writes still in flight may be acknowledged after this; the transfer's
    // outcome reports what was done when it ended.
    final_bytes_ = bytes_done_.load(std::memory_order_relaxed);
    observers.swap(observers_);
  }
  plan_.src->RemoveUser();
  if (listener_ != nullptr) listener_->OnTransferFinished(*this);
  if (!observers.empty()) {
    const TransferInfo info = Info();
    for (Observer& observer : observers) observer(info);
  }
  return true;
}

bool Transfer::AddObserver(Observer observer) {
  MutexLock lock(&mu_);
  if (IsTerminal(state())) return false;
  observers_.push_back(std::move(observer));
  return true;
}

TransferInfo Transfer::Info() const {
  TransferInfo info;
  info.id = plan_.id;
  info.batch_id = plan_.batch_id;
  info.spec = plan_.spec;
  info.peer_node = plan_.peer->node_id();
  info.transport = plan_.transport;
  info.slice_size = plan_.slice_size;
  info.slices = slices_;
  info.submitted_at = submitted_at_;
  MutexLock lock(&mu_);
  info.state = state();
  info.bytes_done =
      IsTerminal(info.state) ? final_bytes_ : bytes_done_.load(std::memory_order_relaxed);
  info.error = error_;
  info.finished_at = finished_at_;
  return info;
}

}  // namespace xferd::engine
