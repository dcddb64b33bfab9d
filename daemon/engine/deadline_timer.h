// Ends transfers that outlive their deadline, even when nothing else happens
// to them (a stalled peer produces no completions to notice it by), and runs
// the engine's delayed housekeeping on the same thread.
#pragma once

#include <functional>
#include <memory>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/transfer.h"

namespace xferd::engine {

class DeadlineTimer {
 public:
  DeadlineTimer();
  ~DeadlineTimer();  // stops the thread

  // Any thread. Transfers without a deadline need not be added.
  void Add(const std::shared_ptr<Transfer>& transfer);
  // Any thread: runs `job` on the timer's thread at `when` (not at all once
  // stopped). It must be short and must not call back into the timer's
  // Stop().
  void RunAt(absl::Time when, std::function<void()> job);
  void Stop();

 private:
  struct Entry {
    absl::Time deadline;
    std::weak_ptr<Transfer> transfer;
    std::function<void()> job;  // set: a delayed job instead of a deadline
    bool operator>(const Entry& other) const { return deadline > other.deadline; }
  };
  void Loop();

  Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace xferd::engine
