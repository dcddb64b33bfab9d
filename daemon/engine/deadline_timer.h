// Ends transfers that outlive their deadline, even when nothing else happens
// to them (a stalled peer produces no completions to notice it by).
#pragma once

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
  void Stop();

 private:
  struct Entry {
    absl::Time deadline;
    std::weak_ptr<Transfer> transfer;
    bool operator>(const Entry& other) const { return deadline > other.deadline; }
  };
  void Loop();

  Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace xferd::engine
