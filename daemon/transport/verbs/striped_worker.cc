#include "daemon/transport/verbs/striped_worker.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::unique_ptr<StripedWorker>> StripedWorker::Create(
    std::vector<std::unique_ptr<VerbsWorker>> devices) {
  auto worker = std::unique_ptr<StripedWorker>(new StripedWorker(std::move(devices)));
  // Room for a rejoin of every lane this poller can hold, so a hand-over
  // is refused only with the table full anyway.
  ASSIGN_OR_RETURN(worker->inbox_, Inbox::Create(kMaxLanesPerWorker));
  worker->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!worker->epoll_.valid()) {
    return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  // An epoll set is readable when one in it is: one fd to sleep on.
  std::vector<int> fds{worker->inbox_->fd()};
  for (const auto& device : worker->devices_) fds.push_back(device->wait_fd());
  for (int fd : fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(worker->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
    }
  }
  worker->waiting_.reserve(kMaxLanesPerWorker);
  return worker;
}

StripedWorker::StripedWorker(std::vector<std::unique_ptr<VerbsWorker>> devices)
    : devices_(std::move(devices)) {}

void StripedWorker::ListWaiting(StripedLane* lane, std::shared_ptr<Link> keep_alive) {
  waiting_.push_back(Listed{lane, std::move(keep_alive)});
}

bool StripedWorker::HandOver(Rejoining rejoining) { return inbox_->Push(std::move(rejoining)); }

uint32_t StripedWorker::Poll(CompletionSink& sink) {
  // First the hand-overs: a rejoined lane may take ops waiting below.
  uint32_t handled = static_cast<uint32_t>(inbox_->Drain(
      [](Rejoining& r) { r.lane->Rejoin(r.slot, std::move(r.owner), r.device_lane, r.weight); }));
  for (const auto& device : devices_) handled += device->Poll(sink);
  // After the completions: they made room, and moved failed devices' ops here.
  for (size_t i = 0; i < waiting_.size();) {
    if (waiting_[i].lane->ServiceWaiting(sink)) {
      ++i;
      continue;
    }
    ++handled;
    waiting_[i] = std::move(waiting_.back());
    waiting_.pop_back();
  }
  return handled;
}

bool StripedWorker::PrepareToSleep() {
  // Ops waiting here wait for completions, which wake the channel; each
  // device worker arms its CQ (and its true commits its inbox) in turn.
  for (const auto& device : devices_) {
    if (!device->PrepareToSleep()) return false;
  }
  return inbox_->PrepareToSleep();  // last: its true commits to the sleep
}

}  // namespace xferd::transport::verbs
