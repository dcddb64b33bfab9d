// The verbs transport: one-sided RDMA WRITEs on RC queue pairs through
// libibverbs (InfiniBand, RoCE v1/v2, Soft-RoCE), on one or several RDMA
// devices. Per device it owns the opened device (its protection domain), a
// worker (CQ) per poller and the async-event thread; per poller a striped
// worker over those. Links pair the devices with a peer's and stripe ops
// over the pairs. Regions are registered on every device, with exactly the
// access they allow, which peers get through memory windows bound to their
// own link's queue pairs (unless memory_windows is off).
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "daemon/transport/link_set.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/async_events.h"
#include "daemon/transport/verbs/device.h"
#include "daemon/transport/verbs/endpoint_check.h"
#include "daemon/transport/verbs/remote_region_check.h"
#include "daemon/transport/verbs/striped_link.h"
#include "daemon/transport/verbs/striped_worker.h"
#include "daemon/transport/verbs/verbs_context.h"
#include "daemon/transport/verbs/verbs_link.h"

namespace xferd::transport::verbs {

struct VerbsTransportOptions {
  uint32_t pollers = 2;
  uint32_t lane_depth = 64;  // ops in flight per lane, per device
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
  // How this daemon's devices pair with a peer's (it decides when it
  // answers a handshake).
  PairingOptions pairing;
  // Pin poller i to the CPUs of the NUMA node of device i % devices (its
  // home device), where sysfs names one.
  bool numa_pinning = true;
  // Peers get keys that work only on their own link's queue pairs (type-2
  // memory windows); off: the MRs' keys, which any queue pair of the
  // protection domain accepts (for devices without type-2 windows).
  bool memory_windows = true;
};

class VerbsTransport final : public Transport {
 public:
  // Opens the selected ports' devices (at least one). Errors come from
  // libibverbs.
  static absl::StatusOr<std::unique_ptr<VerbsTransport>> Create(
      const VerbsTransportOptions& options, const std::vector<PortSelection>& ports,
      const memory::RegionRegistry& regions);
  static absl::StatusOr<std::unique_ptr<VerbsTransport>> Create(
      const VerbsTransportOptions& options, const PortSelection& port,
      const memory::RegionRegistry& regions) {
    return Create(options, std::vector<PortSelection>{port}, regions);
  }
  ~VerbsTransport() override;

  TransportKind kind() const override { return TransportKind::kVerbs; }
  // "rxe0:1", or "rxe0:1,rxe1:1" with several devices.
  std::string device() const override;
  // The first device's port.
  std::optional<RdmaPortInUse> rdma_port() const override {
    const PortSelection& p = devices_.front()->context->port;
    return RdmaPortInUse{p.device, p.port, p.gid.index};
  }
  uint32_t lanes_per_link() const override { return options_.pollers; }
  bool stripes_devices() const override { return devices_.size() > 1; }
  TransportWorker& worker(uint32_t index) override { return *workers_[index]; }

  absl::StatusOr<std::shared_ptr<Link>> CreateLink(LinkEndpoints* local) override;
  absl::StatusOr<std::shared_ptr<Link>> AcceptLink(const PeerIdentity& peer,
                                                   const LinkEndpoints& remote,
                                                   LinkEndpoints* local) override;
  absl::StatusOr<RemoteRegion> GrantRegion(Link& link, const memory::Region& region,
                                           absl::Time deadline) override;
  void RevokeRegion(const memory::Region& region, Link* link) override;
  absl::Status CheckRemoteRegion(const RemoteRegion& region, const Link& link) const override;
  absl::Status CheckEndpoints(const LinkEndpoints& remote) const override {
    return verbs::CheckEndpoints(remote);
  }
  absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> RegisterMemory(
      const memory::Region& region) override;
  TransportStats stats() const override;
  void Shutdown() override;

  const PortSelection& port() const { return devices_.front()->context->port; }

 private:
  struct Device {
    std::shared_ptr<VerbsContext> context;
    LinkDevice link_device;  // context and link settings
    LinkSet links;           // its per-device links, closed when its port goes down
    std::unique_ptr<AsyncEventThread> async;
    std::set<uint32_t> poller_cpus;  // of the pollers it is home to, if pinned
  };
  explicit VerbsTransport(const VerbsTransportOptions& options);
  absl::StatusOr<VerbsLinkSettings> SettingsFor(const VerbsContext& context) const;
  std::vector<LinkDevice> LinkDevices() const;
  std::vector<StripedWorker*> Pollers() const;
  StripedLink::DeviceLinkSink DeviceLinkSink();

  const VerbsTransportOptions options_;
  std::vector<std::unique_ptr<Device>> devices_;
  std::vector<std::unique_ptr<StripedWorker>> workers_;
  std::shared_ptr<std::atomic<int64_t>> registrations_ = std::make_shared<std::atomic<int64_t>>(0);

  LinkSet links_;
};

}  // namespace xferd::transport::verbs
