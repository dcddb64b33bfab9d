// The service's watch thread ("xferd-watch"): it runs what the service does
// in answer to the data path (WatchRegion and WatchTransfer streams, replies
// that wait for transfers), so that a poller only raises a flag and wakes it,
// and never builds a message or starts a gRPC write. It sleeps until a task
// is notified or one asked to run at a given time: with nothing to watch it
// does not wake at all.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"

namespace xferd::service {

// Work the watch thread does for one call (a stream's reactor, a reply).
class WatchTask {
 public:
  // What Run returns once the task has nothing more to do: the loop forgets
  // it (and deletes it if it owns it).
  static constexpr absl::Time kDone = absl::InfinitePast();

  virtual ~WatchTask() = default;
  // Watch thread, with the task's handle locked: does what is due (builds
  // and starts a write, finishes the call). Returns when it wants to run
  // again without being notified (absl::InfiniteFuture(): only then), or
  // kDone.
  virtual absl::Time Run(absl::Time now) = 0;
};

// How other threads reach a task on the watch thread. Shared by the task's
// owner, the loop and whoever notifies it (e.g. a transfer's observer), any
// of which may outlive the others.
class WatchHandle {
 public:
  // Any thread, pollers included: the task runs soon. Never waits for the
  // watch thread's work; repeated calls before the task runs are one.
  void Notify();
  // The task's owner, before destroying it (not from within Run): waits for
  // a Run under way to end; after this returns, the task never runs again.
  void Detach();

 private:
  friend class WatchLoop;
  struct Wakeup;
  WatchHandle(WatchTask* task, std::shared_ptr<Wakeup> wakeup)
      : wakeup_(std::move(wakeup)), task_(task) {}

  const std::shared_ptr<Wakeup> wakeup_;
  Mutex mu_;
  WatchTask* task_ ABSL_GUARDED_BY(mu_);  // null once detached
  std::atomic<bool> notified_{false};
};

class WatchLoop {
 public:
  // Starts the thread.
  WatchLoop();
  // Stops and joins it. Tasks still attached no longer run; their handles
  // stay safe to notify.
  ~WatchLoop();
  WatchLoop(const WatchLoop&) = delete;
  WatchLoop& operator=(const WatchLoop&) = delete;

  // Any thread: runs `task` once soon, then whenever notified or due. The
  // task stays the caller's, who detaches the handle before destroying it.
  std::shared_ptr<WatchHandle> Add(WatchTask* task);
  // The same for a task the loop owns: deleted once it returns kDone (or
  // with the loop).
  std::shared_ptr<WatchHandle> Add(std::unique_ptr<WatchTask> task);

  // Times the thread has woken up to look at its tasks (for tests).
  uint64_t passes() const { return passes_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::shared_ptr<WatchHandle> handle;
    std::unique_ptr<WatchTask> owned;  // null for a caller's task
    absl::Time due = absl::InfinitePast();
  };
  std::shared_ptr<WatchHandle> Add(WatchTask* task, std::unique_ptr<WatchTask> owned);
  void Loop();
  // Runs the tasks notified or due; forgets detached ones; returns the
  // earliest time one wants to run.
  absl::Time RunDue(std::vector<Entry>& entries);

  const std::shared_ptr<WatchHandle::Wakeup> wakeup_;
  std::atomic<uint64_t> passes_{0};
  std::thread thread_;
};

}  // namespace xferd::service
