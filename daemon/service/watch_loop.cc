#include "daemon/service/watch_loop.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"

namespace xferd::service {
namespace {

// Tasks added since the loop last looked, with the loop's ownership of them.
using Added = std::vector<std::pair<std::shared_ptr<WatchHandle>, std::unique_ptr<WatchTask>>>;

}  // namespace

// What the loop sleeps on, shared with every handle so that notifying a
// handle stays safe after the loop is gone.
struct WatchHandle::Wakeup {
  // Any thread: makes the loop look at its tasks. Only the first call after
  // the loop last looked takes the mutex (its release wakes the loop).
  void Wake() {
    if (pending.exchange(true, std::memory_order_acq_rel)) return;
    MutexLock lock(&mu);
  }

  Mutex mu;
  std::atomic<bool> pending{false};
  bool stopping ABSL_GUARDED_BY(mu) = false;
  Added added ABSL_GUARDED_BY(mu);
};

void WatchHandle::Notify() {
  notified_.store(true, std::memory_order_release);
  wakeup_->Wake();
}

void WatchHandle::Detach() {
  {
    MutexLock lock(&mu_);
    task_ = nullptr;
  }
  wakeup_->Wake();  // so that the loop lets go of this handle now
}

WatchLoop::WatchLoop() : wakeup_(std::make_shared<WatchHandle::Wakeup>()) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-watch");
    Loop();
  });
}

WatchLoop::~WatchLoop() {
  {
    MutexLock lock(&wakeup_->mu);
    wakeup_->stopping = true;
  }
  thread_.join();
  Added added;
  {
    MutexLock lock(&wakeup_->mu);
    added.swap(wakeup_->added);  // they refer to wakeup_: break the cycle
  }
}

std::shared_ptr<WatchHandle> WatchLoop::Add(WatchTask* task) { return Add(task, nullptr); }

std::shared_ptr<WatchHandle> WatchLoop::Add(std::unique_ptr<WatchTask> task) {
  WatchTask* raw = task.get();
  return Add(raw, std::move(task));
}

std::shared_ptr<WatchHandle> WatchLoop::Add(WatchTask* task, std::unique_ptr<WatchTask> owned) {
  std::shared_ptr<WatchHandle> handle(new WatchHandle(task, wakeup_));
  MutexLock lock(&wakeup_->mu);
  wakeup_->added.emplace_back(handle, std::move(owned));
  wakeup_->pending.store(true, std::memory_order_release);
  return handle;
}

void WatchLoop::Loop() {
  WatchHandle::Wakeup& w = *wakeup_;
  std::vector<Entry> entries;
  absl::Time wake_at = absl::InfiniteFuture();
  while (true) {
    Added added;
    {
      MutexLock lock(&w.mu);
      w.mu.AwaitWithDeadline(
          [&w]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(w.mu) {
            return w.stopping || w.pending.load() || !w.added.empty();
          },
          wake_at);
      if (w.stopping) break;
      added.swap(w.added);
    }
    // Before looking: a notification from now on makes the next pass.
    w.pending.store(false, std::memory_order_seq_cst);
    passes_.fetch_add(1, std::memory_order_relaxed);
    for (auto& [handle, owned] : added) {
      entries.push_back(Entry{std::move(handle), std::move(owned)});
    }
    wake_at = RunDue(entries);
  }
}

absl::Time WatchLoop::RunDue(std::vector<Entry>& entries) {
  const absl::Time now = absl::Now();
  absl::Time next = absl::InfiniteFuture();
  for (size_t i = 0; i < entries.size();) {
    Entry& entry = entries[i];
    WatchHandle& handle = *entry.handle;
    bool detached;
    {
      MutexLock lock(&handle.mu_);
      detached = handle.task_ == nullptr;
      if (!detached &&
          (handle.notified_.exchange(false, std::memory_order_acq_rel) || entry.due <= now)) {
        entry.due = handle.task_->Run(now);
        if (entry.due == WatchTask::kDone) {
          handle.task_ = nullptr;
          detached = true;
        }
      }
    }
    if (detached) {
      // Unlocked first: this may drop the last reference to the handle, and
      // deletes an owned task.
      std::swap(entry, entries.back());
      entries.pop_back();
      continue;
    }
    next = std::min(next, entry.due);
    ++i;
  }
  return next;
}

}  // namespace xferd::service
