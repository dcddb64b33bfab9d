// A few threads for blocking control-plane work: handshakes, region
// resolution, registering large regions, notifying peers. gRPC handlers hand
// such work here and reply from its callback, so they never block.
#pragma once

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/base/mutex.h"

namespace xferd::engine {

class ControlExecutor {
 public:
  explicit ControlExecutor(int threads);
  // Runs what is queued, then joins.
  ~ControlExecutor();

  // Any thread. After Stop(), the job runs inline (shutdown paths stay simple).
  void Run(std::function<void()> job);
  void Stop();

 private:
  void Loop();

  Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace xferd::engine
