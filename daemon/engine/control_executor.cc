#include "daemon/engine/control_executor.h"

#include <pthread.h>

namespace xferd::engine {

ControlExecutor::ControlExecutor(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "xferd-control");
      Loop();
    });
  }
}

ControlExecutor::~ControlExecutor() { Stop(); }

void ControlExecutor::Run(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      return;
    }
  }
  job();
}

void ControlExecutor::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void ControlExecutor::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
      mu_.Await(ready);
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace xferd::engine
