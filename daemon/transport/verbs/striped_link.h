// The link the engine sees on the verbs transport: one per-device VerbsLink
// for each device pair (the handshake pairs them, device_pairing.h), and a
// StripedLane per poller spreading ops over them. A device pair that fails
// breaks alone: its ops move to the others; the link breaks when none is
// left (or on Close).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/device_pairing.h"
#include "daemon/transport/verbs/striped_lane.h"
#include "daemon/transport/verbs/striped_worker.h"
#include "daemon/transport/verbs/verbs_link.h"

namespace xferd::transport::verbs {

// One local device as links see it.
struct LinkDevice {
  std::shared_ptr<VerbsContext> context;
  VerbsLinkSettings settings;
};

struct PairingOptions {
  Pairing pairing = Pairing::kIndex;
  uint32_t prefix_bits = 0;
};

class StripedLink final : public Link, public std::enable_shared_from_this<StripedLink> {
 public:
  // `add_device_link` registers a per-device link with its device (so a
  // port-down event there can close it).
  using DeviceLinkSink = std::function<void(uint32_t device, const std::shared_ptr<Link>&)>;

  // Initiator: a per-device link with `lanes` QPs on every device.
  static absl::StatusOr<std::shared_ptr<StripedLink>> Create(
      const std::vector<LinkDevice>& devices, const std::vector<StripedWorker*>& pollers,
      uint32_t lanes, const DeviceLinkSink& add_device_link);
  // Responder: pairs the initiator's devices with ours, connects a link on
  // each pair, and describes the answer in `local`.
  static absl::StatusOr<std::shared_ptr<StripedLink>> Accept(
      const std::vector<LinkDevice>& devices, const std::vector<StripedWorker*>& pollers,
      const PeerIdentity& peer, uint32_t lanes, const LinkEndpoints& remote,
      const PairingOptions& pairing, const DeviceLinkSink& add_device_link,
      LinkEndpoints* local);
  ~StripedLink() override;

  // The initiator's offer: every device.
  void Describe(LinkEndpoints* out) const;

  // link_grants.cc. The keys of `region` for the peer: memory windows on
  // every paired device, each key working on its lane's queue pair only
  // (RemoteRegion::key_lanes). Control thread; waits for the pollers to
  // bind until `deadline`. UNAVAILABLE when not (or no longer) connected.
  absl::StatusOr<RemoteRegion> Grant(const memory::Region& region,
                                     const VerbsRegistration& registration, absl::Time deadline);
  // Releases what Grant gave for region `region_id`, on every device.
  void Revoke(uint32_t region_id);

  absl::Status Connect(const PeerIdentity& peer, const LinkEndpoints& remote,
                       absl::Time deadline) override;
  void Close(absl::Status reason) override;
  uint32_t lane_count() const override { return lane_count_.load(std::memory_order_acquire); }
  Lane& lane(uint32_t index) override { return *stripes_[index]; }
  bool ready() const override { return active_.load(std::memory_order_acquire) && !broken(); }

 private:
  struct DevicePairLink {
    std::shared_ptr<VerbsLink> link;
    uint32_t local_device = 0;
    uint64_t rate_mbps = 0;  // min of both ends; 0 unknown
    bool paired = false;
  };
  StripedLink(PeerIdentity peer, std::vector<StripedWorker*> pollers);
  absl::Status AddDeviceLink(const LinkDevice& device, uint32_t lanes,
                             const DeviceLinkSink& add_device_link);
  // Builds the striped lanes over the paired device links; publishes them.
  void BuildStripes(uint32_t lanes, const PeerIdentity& peer);
  // A device link closed: the link breaks once no paired one is left.
  void OnDeviceLinkClosed();

  const std::vector<StripedWorker*> pollers_;
  std::vector<DevicePairLink> device_links_;  // fixed once published
  std::vector<std::unique_ptr<StripedLane>> stripes_;
  std::atomic<uint32_t> lane_count_{0};
  std::atomic<bool> active_{false};
  // The READ depths offered (the transport's, the same on every device).
  uint32_t max_rd_atomic_ = 1;
  uint32_t max_dest_rd_atomic_ = 1;
};

}  // namespace xferd::transport::verbs
