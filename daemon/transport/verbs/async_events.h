// The device's asynchronous events (ibv_get_async_event): a queue pair gone
// fatal, a port going down or coming back, the device failing. The affected
// per-device links are closed with a clear status: a striped link moves their
// ops to its other devices, and fails only when none is left. A port that
// comes back is marked up, and live links rejoin it.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "daemon/common/unique_fd.h"
#include "daemon/transport/verbs/verbs_context.h"

namespace xferd::transport::verbs {

class AsyncEventThread {
 public:
  // `close_all` closes every link on this device with the given reason.
  AsyncEventThread(std::shared_ptr<VerbsContext> context,
                   std::function<void(absl::Status)> close_all);
  ~AsyncEventThread();  // stops and joins

 private:
  void Run();
  void Handle(const ibv_async_event& event);

  const std::shared_ptr<VerbsContext> context_;
  const std::function<void(absl::Status)> close_all_;
  UniqueFd stop_;  // eventfd
  std::thread thread_;
};

}  // namespace xferd::transport::verbs
