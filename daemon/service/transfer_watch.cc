#include "daemon/service/transfer_watch.h"

#include <pthread.h>

#include "daemon/service/proto_convert.h"

namespace xferd::service {
namespace {

// Pace of the ticker; WatchTransfer intervals are at least this.
constexpr absl::Duration kTick = absl::Milliseconds(10);

}  // namespace

WatchTicker::WatchTicker() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-watch");
    Loop();
  });
}

WatchTicker::~WatchTicker() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void WatchTicker::Add(std::shared_ptr<TransferWatchHandle> handle) {
  MutexLock lock(&mu_);
  handles_.push_back(std::move(handle));
}

void WatchTicker::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; }, kTick);
    for (size_t i = 0; i < handles_.size();) {
      bool ended;
      {
        TransferWatchHandle& handle = *handles_[i];
        MutexLock handle_lock(&handle.mu);
        ended = handle.reactor == nullptr;
        if (!ended) handle.reactor->Poke(/*force=*/false);
      }
      if (!ended) {
        ++i;
        continue;
      }
      // Unlocked first: this may drop the last reference to the handle.
      handles_[i] = std::move(handles_.back());
      handles_.pop_back();
    }
  }
}

TransferWatchReactor::TransferWatchReactor(std::shared_ptr<engine::Transfer> transfer,
                                           absl::Duration interval, WatchTicker& ticker)
    : transfer_(std::move(transfer)),
      interval_(std::max(interval, kTick)),
      handle_(std::make_shared<TransferWatchHandle>()) {
  {
    MutexLock lock(&handle_->mu);
    handle_->reactor = this;
  }
  {
    MutexLock lock(&mu_);
    SendLocked();
  }
  ticker.Add(handle_);
  // The end of the transfer is sent right away, not at the next tick.
  const bool observing = transfer_->AddObserver([handle = handle_](const engine::TransferInfo&) {
    MutexLock lock(&handle->mu);
    if (handle->reactor != nullptr) handle->reactor->Poke(/*force=*/true);
  });
  if (!observing) {  // it had already ended
    MutexLock lock(&handle_->mu);
    Poke(/*force=*/true);
  }
}

void TransferWatchReactor::Poke(bool force) {
  MutexLock lock(&mu_);
  if (writing_ || finished_ || sent_terminal_) return;
  if (force || absl::Now() >= next_) SendLocked();
}

void TransferWatchReactor::SendLocked() {
  snapshot_.Clear();
  const engine::TransferInfo info = transfer_->Info();
  ToProto(info, &snapshot_);
  sent_terminal_ = engine::IsTerminal(info.state);
  next_ = absl::Now() + interval_;
  writing_ = true;
  StartWrite(&snapshot_);
}

void TransferWatchReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) {
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watcher went away"));
  } else if (sent_terminal_) {
    FinishLocked(grpc::Status::OK);
  } else if (engine::IsTerminal(transfer_->state())) {
    SendLocked();  // it ended while the previous snapshot was on its way
  }
}

void TransferWatchReactor::OnCancel() {
  MutexLock lock(&mu_);
  FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
}

void TransferWatchReactor::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void TransferWatchReactor::OnDone() {
  {
    MutexLock lock(&handle_->mu);
    handle_->reactor = nullptr;
  }
  delete this;
}

}  // namespace xferd::service
