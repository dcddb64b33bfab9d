#include "daemon/transport/tcp/tcp_worker.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"

namespace xferd::transport::tcp {
namespace {

// Events taken from epoll per Poll call.
constexpr int kEpollBatch = 64;
// Buffer for draining refused or failed inbound payload, and for TLS
// payload bound for a file region (decrypted here, then placed by a guarded
// copy): a few TLS records' worth.
constexpr size_t kScratchBytes = 64 << 10;

}  // namespace

absl::StatusOr<std::unique_ptr<TcpWorker>> TcpWorker::Create() {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll.valid()) {
    return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  // Commands come from control threads, one attach and one detach per lane.
  ASSIGN_OR_RETURN(std::unique_ptr<Inbox> inbox, Inbox::Create(Inbox::kUnbounded));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the inbox's eventfd is the only entry without a lane
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, inbox->fd(), &ev) != 0) {
    return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
  }
  return std::unique_ptr<TcpWorker>(new TcpWorker(std::move(epoll), std::move(inbox)));
}

TcpWorker::TcpWorker(UniqueFd epoll, std::unique_ptr<Inbox> inbox)
    : epoll_(std::move(epoll)), inbox_(std::move(inbox)), scratch_(kScratchBytes) {}

TcpWorker::~TcpWorker() = default;

void TcpWorker::Enqueue(Command command) {
  XFERD_CHECK(inbox_->Push(std::move(command)));  // unbounded
}

void TcpWorker::RequestAttach(std::shared_ptr<Link> keep_alive, TcpLane* lane, UniqueFd fd,
                              UniqueSsl ssl, bool kernel_tls) {
  Enqueue(Command{true, std::move(keep_alive), lane, std::move(fd), std::move(ssl), kernel_tls});
}

void TcpWorker::RequestDetach(std::shared_ptr<Link> keep_alive, TcpLane* lane) {
  Enqueue(Command{false, std::move(keep_alive), lane, UniqueFd(), nullptr, false});
}

void TcpWorker::Apply(Command& c, CompletionSink& sink) {
  if (c.attach) {
    if (c.keep_alive->broken()) return;  // closed while connecting: fd closes with the command
    c.lane->Attach(std::move(c.fd), std::move(c.ssl), c.kernel_tls, this);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = c.lane;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, c.lane->fd(), &ev) != 0) {
      c.keep_alive->Close(absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno))));
    }
    attached_.push_back(Attached{c.lane, std::move(c.keep_alive)});
    to_flush_.reserve(attached_.size());  // so listing a lane never allocates
    attached_count_.store(static_cast<uint32_t>(attached_.size()), std::memory_order_relaxed);
    return;
  }
  auto it = std::find_if(attached_.begin(), attached_.end(),
                         [&](const Attached& a) { return a.lane == c.lane; });
  if (c.lane->attached()) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.lane->fd(), nullptr);
  if (c.lane->flush_listed) {
    to_flush_.erase(std::find(to_flush_.begin(), to_flush_.end(), c.lane));
    c.lane->flush_listed = false;
  }
  c.lane->Detach(c.keep_alive->status(), sink);
  if (it != attached_.end()) {
    *it = std::move(attached_.back());
    attached_.pop_back();
  }
  attached_count_.store(static_cast<uint32_t>(attached_.size()), std::memory_order_relaxed);
}

void TcpWorker::AfterLaneIo(TcpLane& lane) {
  if (!lane.error().ok()) {
    // The link breaks as a whole; its lanes are detached through the inbox.
    lane.link().Close(lane.error());
    return;
  }
  if (lane.wants_writable() == lane.writable_armed) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | (lane.wants_writable() ? uint32_t{EPOLLOUT} : 0u);
  ev.data.ptr = &lane;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, lane.fd(), &ev);
  lane.writable_armed = lane.wants_writable();
}

void TcpWorker::ListForFlush(TcpLane& lane) {
  if (lane.flush_listed) return;
  lane.flush_listed = true;
  to_flush_.push_back(&lane);
}

// Frames posted since the last pass leave in one write per lane, whatever
// number of transfers posted them: the doorbell batching of the verbs
// chains, for sockets.
uint32_t TcpWorker::FlushListed() {
  for (TcpLane* lane : to_flush_) {
    lane->flush_listed = false;
    if (!lane->attached() || !lane->error().ok()) continue;
    (void)lane->Flush();  // a send error is kept by the lane and seen below
    AfterLaneIo(*lane);
  }
  const uint32_t flushed = static_cast<uint32_t>(to_flush_.size());
  to_flush_.clear();
  return flushed;
}

uint32_t TcpWorker::Poll(CompletionSink& sink) {
  // Before the inbox: a lane it detaches may go with its command.
  uint32_t handled = FlushListed();
  handled += static_cast<uint32_t>(inbox_->Drain([&](Command& c) { Apply(c, sink); }));
  epoll_event events[kEpollBatch];
  const int n = ::epoll_wait(epoll_.get(), events, kEpollBatch, 0);
  for (int i = 0; i < n; ++i) {
    auto* lane = static_cast<TcpLane*>(events[i].data.ptr);
    if (lane == nullptr || !lane->attached()) continue;  // the inbox's eventfd: next pass
    if (events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      (void)lane->OnReadable(sink, absl::MakeSpan(scratch_), &handled);
    }
    if ((events[i].events & EPOLLOUT) && lane->error().ok()) {
      (void)lane->Flush();
      ++handled;
    }
    AfterLaneIo(*lane);
  }
  // A lane that spent its read budget may leave decrypted bytes in OpenSSL
  // and none in the socket, which level-triggered epoll would never report.
  for (const Attached& a : attached_) {
    if (!a.lane->attached() || !a.lane->error().ok() || !a.lane->input_buffered()) continue;
    (void)a.lane->OnReadable(sink, absl::MakeSpan(scratch_), &handled);
    ++handled;
    AfterLaneIo(*a.lane);
  }
  return handled;
}

}  // namespace xferd::transport::tcp
