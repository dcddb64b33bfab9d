// The TCP transport's per-poller worker: an epoll set over this poller's lanes
// (one per peer) and an inbox through which control threads attach and detach
// lanes. Everything but the Request* methods runs on the poller thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"
#include "daemon/common/wake_inbox.h"
#include "daemon/transport/tcp/tcp_lane.h"
#include "daemon/transport/transport.h"

namespace xferd::transport::tcp {

class TcpWorker final : public TransportWorker {
 public:
  // RESOURCE_EXHAUSTED without descriptors for its epoll set and eventfd.
  static absl::StatusOr<std::unique_ptr<TcpWorker>> Create();
  ~TcpWorker() override;

  uint32_t Poll(CompletionSink& sink) override;
  int wait_fd() const override { return epoll_.get(); }
  bool PrepareToSleep() override { return inbox_->PrepareToSleep(); }

  // Any thread. `keep_alive` owns `lane` and stays referenced while attached.
  // `ssl`, `kernel_tls`: as TcpLane::Attach takes them.
  void RequestAttach(std::shared_ptr<Link> keep_alive, TcpLane* lane, UniqueFd fd, UniqueSsl ssl,
                     bool kernel_tls);
  void RequestDetach(std::shared_ptr<Link> keep_alive, TcpLane* lane);

  // Poller thread: after a lane did I/O, closes its link on error and
  // tracks its EPOLLOUT interest.
  void AfterLaneIo(TcpLane& lane);
  // Poller thread: `lane` has frames posted; they go out at the start of
  // the next Poll, together with whatever else is posted until then.
  void ListForFlush(TcpLane& lane);

  // Lanes attached right now (for stats). Any thread.
  uint32_t attached_lanes() const { return attached_count_.load(std::memory_order_relaxed); }

 private:
  struct Command {
    bool attach = false;
    std::shared_ptr<Link> keep_alive;
    TcpLane* lane = nullptr;
    UniqueFd fd;
    UniqueSsl ssl;
    bool kernel_tls = false;
  };
  struct Attached {
    TcpLane* lane;
    std::shared_ptr<Link> keep_alive;
  };

  using Inbox = WakeInbox<Command>;

  TcpWorker(UniqueFd epoll, std::unique_ptr<Inbox> inbox);
  void Enqueue(Command command);
  // Poller thread: attaches or detaches a lane as `command` says.
  void Apply(Command& command, CompletionSink& sink);
  // Sends what the listed lanes have posted; returns how many there were.
  uint32_t FlushListed();

  UniqueFd epoll_;
  // Its eventfd is in the epoll set, so a sleeping poller wakes for commands.
  const std::unique_ptr<Inbox> inbox_;

  // Poller thread only.
  std::vector<Attached> attached_;
  std::vector<TcpLane*> to_flush_;  // ListForFlush, in order; capacity >= attached_
  std::vector<std::byte> scratch_;
  std::atomic<uint32_t> attached_count_{0};
};

}  // namespace xferd::transport::tcp
