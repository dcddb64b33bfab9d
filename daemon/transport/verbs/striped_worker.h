// One poller's share of the verbs transport across every device it drives:
// that device's worker (its CQ) per device, polled in turn, one epoll set
// over all their completion channels for sleeping, the striped lanes
// holding ops that wait to move to another device, and an inbox through
// which control threads hand rejoined device lanes to the striped lanes
// (which only this poller touches).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"
#include "daemon/common/wake_inbox.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/striped_lane.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {

class StripedWorker final : public TransportWorker, public WaitingLanes {
 public:
  // `devices`: this poller's worker on each device, in device order.
  static absl::StatusOr<std::unique_ptr<StripedWorker>> Create(
      std::vector<std::unique_ptr<VerbsWorker>> devices);

  uint32_t Poll(CompletionSink& sink) override;
  int wait_fd() const override { return epoll_.get(); }
  bool PrepareToSleep() override;
  std::vector<uint32_t> preferred_cpus() const override { return preferred_cpus_; }
  void set_preferred_cpus(std::vector<uint32_t> cpus) { preferred_cpus_ = std::move(cpus); }

  VerbsWorker& device(uint32_t index) { return *devices_[index]; }
  uint32_t device_count() const { return static_cast<uint32_t>(devices_.size()); }
  void ListWaiting(StripedLane* lane, std::shared_ptr<Link> keep_alive) override;

  // A rejoined device pair's lane for one striped lane (StripedLane::Rejoin).
  struct Rejoining {
    StripedLane* lane = nullptr;
    uint32_t slot = 0;
    std::shared_ptr<Link> owner;  // the fresh per-device link
    VerbsLane* device_lane = nullptr;
    uint64_t weight = 1;
    std::shared_ptr<Link> keep_alive;  // the striped link, owner of `lane`
  };
  // Any thread: the poller hands `rejoining` to its lane on its next pass.
  // False when too many wait already.
  [[nodiscard]] bool HandOver(Rejoining rejoining);

 private:
  struct Listed {
    StripedLane* lane;
    std::shared_ptr<Link> keep_alive;
  };
  using Inbox = WakeInbox<Rejoining>;
  explicit StripedWorker(std::vector<std::unique_ptr<VerbsWorker>> devices);

  std::vector<std::unique_ptr<VerbsWorker>> devices_;
  std::unique_ptr<Inbox> inbox_;  // rejoined lanes to hand over
  UniqueFd epoll_;                // every device worker's wait fd, and the inbox's
  std::vector<Listed> waiting_;  // poller thread only
  std::vector<uint32_t> preferred_cpus_;  // set before the poller starts
};

}  // namespace xferd::transport::verbs
