// One poller's share of the verbs transport across every device it drives:
// that device's worker (its CQ) per device, polled in turn, one epoll set
// over all their completion channels for sleeping, and the striped lanes
// holding ops that wait to move to another device.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/striped_lane.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {

class StripedWorker final : public TransportWorker {
 public:
  // `devices`: this poller's worker on each device, in device order.
  static absl::StatusOr<std::unique_ptr<StripedWorker>> Create(
      std::vector<std::unique_ptr<VerbsWorker>> devices);

  uint32_t Post(Lane& lane, absl::Span<const DataOp> ops) override;
  uint32_t Poll(CompletionSink& sink) override;
  int wait_fd() const override { return epoll_.get(); }
  bool PrepareToSleep() override;
  std::vector<uint32_t> preferred_cpus() const override { return preferred_cpus_; }
  void set_preferred_cpus(std::vector<uint32_t> cpus) { preferred_cpus_ = std::move(cpus); }

  VerbsWorker& device(uint32_t index) { return *devices_[index]; }
  uint32_t device_count() const { return static_cast<uint32_t>(devices_.size()); }
  // Poller thread: `lane` holds ops to move; `keep_alive` owns it.
  void ListWaiting(StripedLane* lane, std::shared_ptr<Link> keep_alive);

 private:
  struct Listed {
    StripedLane* lane;
    std::shared_ptr<Link> keep_alive;
  };
  explicit StripedWorker(std::vector<std::unique_ptr<VerbsWorker>> devices);

  std::vector<std::unique_ptr<VerbsWorker>> devices_;
  UniqueFd epoll_;  // every device worker's wait fd
  std::vector<Listed> waiting_;  // poller thread only
  std::vector<uint32_t> preferred_cpus_;  // set before the poller starts
};

}  // namespace xferd::transport::verbs
