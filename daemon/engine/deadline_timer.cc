#include "daemon/engine/deadline_timer.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "daemon/base/units.h"

namespace xferd::engine {

DeadlineTimer::DeadlineTimer() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-deadline");
    Loop();
  });
}

DeadlineTimer::~DeadlineTimer() { Stop(); }

void DeadlineTimer::Add(const std::shared_ptr<Transfer>& transfer) {
  MutexLock lock(&mu_);
  queue_.push(Entry{transfer->deadline(), transfer});
}

void DeadlineTimer::RunAt(absl::Time when, std::function<void()> job) {
  MutexLock lock(&mu_);
  queue_.push(Entry{when, {}, std::move(job)});
}

void DeadlineTimer::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DeadlineTimer::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time next = queue_.empty() ? absl::InfiniteFuture() : queue_.top().deadline;
    auto wake = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (!queue_.empty() && queue_.top().deadline < next);
    };
    // Wakes at the earliest deadline, when an earlier one is added, or to stop.
    mu_.AwaitWithDeadline(wake, next);
    const absl::Time now = absl::Now();
    while (!queue_.empty() && queue_.top().deadline <= now) {
      if (queue_.top().job) {
        std::function<void()> job = queue_.top().job;
        queue_.pop();
        mu_.Unlock();
        job();
        mu_.Lock();
        continue;
      }
      std::shared_ptr<Transfer> transfer = queue_.top().transfer.lock();
      queue_.pop();
      if (transfer == nullptr || IsTerminal(transfer->state())) continue;
      mu_.Unlock();
      const TransferInfo info = transfer->Info();
      transfer->Finish(
          TransferState::kFailed,
          absl::DeadlineExceededError(absl::StrCat(
              "transfer ", info.id, " did not finish within its timeout of ",
              absl::FormatDuration(info.spec.timeout), " (", FormatBytes(info.bytes_done), " of ",
              FormatBytes(info.spec.length), " acknowledged)")));
      mu_.Lock();
    }
  }
}

}  // namespace xferd::engine
