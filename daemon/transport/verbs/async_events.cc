#include "daemon/transport/verbs/async_events.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/verbs_lane.h"

namespace xferd::transport::verbs {

AsyncEventThread::AsyncEventThread(std::shared_ptr<VerbsContext> context,
                                   std::function<void(absl::Status)> close_all)
    : context_(std::move(context)),
      close_all_(std::move(close_all)),
      stop_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  const int fd = context_->context->async_fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-ibv-async");
    Run();
  });
}

AsyncEventThread::~AsyncEventThread() {
  const uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof(one));
  thread_.join();
}

void AsyncEventThread::Run() {
  pollfd fds[2] = {{context_->context->async_fd, POLLIN, 0}, {stop_.get(), POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("async event poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) return;
    ibv_async_event event;
    while (ibv_get_async_event(context_->context.get(), &event) == 0) {
      Handle(event);
      // A QP cannot be destroyed while its events are unacknowledged, which
      // keeps the lane alive while it is handled here.
      ibv_ack_async_event(&event);
    }
  }
}

void AsyncEventThread::Handle(const ibv_async_event& event) {
  const char* what = ibv_event_type_str(event.event_type);
  switch (event.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR: {
      auto* lane = static_cast<VerbsLane*>(event.element.qp->qp_context);
      spdlog::warn("queue pair {} to {}: {}", event.element.qp->qp_num, lane->link().peer().node_id,
                   what);
      lane->link().Close(absl::UnavailableError(
          absl::StrCat("queue pair to ", lane->link().peer().node_id, " failed: ", what)));
      break;
    }
    case IBV_EVENT_PORT_ERR:
      // Only this device's links close: a link striped over several devices
      // moves their ops to the others.
      context_->up.store(false, std::memory_order_relaxed);
      [[fallthrough]];
    case IBV_EVENT_CQ_ERR:
    case IBV_EVENT_DEVICE_FATAL:
      spdlog::error("RDMA device {}: {}", context_->port.device, what);
      close_all_(
          absl::UnavailableError(absl::StrCat("RDMA device ", context_->port.device, ": ", what)));
      break;
    case IBV_EVENT_PORT_ACTIVE:
      // New links use the device again, and live links rejoin it: their
      // broken pairs on it get fresh attempts (StripedLink::OfferRejoin).
      context_->up.store(true, std::memory_order_relaxed);
      context_->activations.fetch_add(1, std::memory_order_relaxed);
      spdlog::info("RDMA device {}: {}: back in service", context_->port.device, what);
      break;
    default:
      spdlog::info("RDMA device {}: {}", context_->port.device, what);
      break;
  }
}

}  // namespace xferd::transport::verbs
