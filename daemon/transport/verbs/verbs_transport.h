// The verbs transport: one-sided RDMA WRITEs on RC queue pairs, one per
// poller per peer, through libibverbs (InfiniBand, RoCE v1/v2, Soft-RoCE).
// It owns the opened device, a worker (CQ) per poller, the async-event
// thread, and registers regions with exactly the access they allow.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "daemon/transport/link_set.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/async_events.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/remote_region_check.h"
#include "daemon/transport/verbs/verbs_context.h"
#include "daemon/transport/verbs/verbs_link.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {

struct VerbsTransportOptions {
  uint32_t pollers = 2;
  uint32_t lane_depth = 64;  // ops in flight per lane
  uint8_t qp_timeout = 14;
  uint8_t retry_count = 3;
  // Regions larger than this are registered as several MRs, in parallel.
  uint64_t mr_chunk = 1ull << 30;
  int registration_threads = 4;
  uint32_t cq_entries = 65536;
  uint32_t max_inline = 64;
  // Caps the RDMA READs a queue pair has outstanding (and serves) below the
  // device's limits; 0 = the device's limits. Tests use it to make the
  // bound bite.
  uint32_t max_rd_atomic = 0;
};

class VerbsTransport final : public Transport {
 public:
  // Opens the selected port's device. Errors come from libibverbs.
  static absl::StatusOr<std::unique_ptr<VerbsTransport>> Create(
      const VerbsTransportOptions& options, const PortSelection& port,
      const memory::RegionRegistry& regions);
  ~VerbsTransport() override;

  TransportKind kind() const override { return TransportKind::kVerbs; }
  std::string device() const override;
  std::optional<RdmaPortInUse> rdma_port() const override {
    return RdmaPortInUse{context_->port.device, context_->port.port, context_->port.gid.index};
  }
  uint32_t lanes_per_link() const override { return options_.pollers; }
  TransportWorker& worker(uint32_t index) override { return *workers_[index]; }

  absl::StatusOr<std::shared_ptr<Link>> CreateLink(LinkEndpoints* local) override;
  absl::StatusOr<std::shared_ptr<Link>> AcceptLink(const PeerIdentity& peer,
                                                   const LinkEndpoints& remote,
                                                   LinkEndpoints* local) override;
  RemoteRegion DescribeRegion(const memory::Region& region) const override;
  absl::Status CheckRemoteRegion(const RemoteRegion& region) const override;
  absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> RegisterMemory(
      const memory::Region& region) override;
  TransportStats stats() const override;
  void Shutdown() override;

  const PortSelection& port() const { return context_->port; }

 private:
  VerbsTransport(const VerbsTransportOptions& options, std::shared_ptr<VerbsContext> context);
  absl::StatusOr<std::shared_ptr<VerbsLink>> NewLink(const PeerIdentity& peer, uint32_t lanes);

  const VerbsTransportOptions options_;
  const std::shared_ptr<VerbsContext> context_;
  VerbsLinkSettings link_settings_;
  std::vector<std::unique_ptr<VerbsWorker>> workers_;
  std::shared_ptr<std::atomic<int64_t>> registrations_ = std::make_shared<std::atomic<int64_t>>(0);

  LinkSet links_;
  // Last: it closes links_, so it stops first.
  std::unique_ptr<AsyncEventThread> async_;
};

}  // namespace xferd::transport::verbs
