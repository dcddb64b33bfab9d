// The link the engine sees on the verbs transport: one per-device VerbsLink
// for each device pair (the handshake pairs them, device_pairing.h), and a
// StripedLane per poller spreading ops over them. A device pair that fails
// breaks alone: its ops move to the others; the link breaks when none is
// left (or on Close). A broken pair rejoins (striped_rejoin.cc): fresh
// queue pairs on both ends, handed to each striped lane by its poller.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/device_pairing.h"
#include "daemon/transport/verbs/rejoin_budget.h"
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

class StripedLink final : public Link,
                          public LinkRejoin,
                          public std::enable_shared_from_this<StripedLink> {
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

  // striped_rejoin.cc: the rejoin steps (transport.h, LinkRejoin).
  LinkRejoin* rejoin() override { return this; }
  bool OfferRejoin(LinkEndpoints* offer) override;
  absl::Status AcceptRejoin(const LinkEndpoints& offer, bool keep_own,
                            LinkEndpoints* answer) override;
  std::vector<uint32_t> ConnectRejoin(const LinkEndpoints& answer) override;
  void CommitRejoin(const std::vector<uint32_t>& devices) override;

 private:
  struct DevicePairLink {
    // The per-device link in service (replaced by a rejoin), and fresh ones
    // of a rejoin under way: ours offered, or the peer's accepted (awaiting
    // its commit). Guarded by mu_ once published.
    std::shared_ptr<VerbsLink> link;
    std::shared_ptr<VerbsLink> offered;
    std::shared_ptr<VerbsLink> accepted;
    uint32_t local_device = 0;
    uint32_t remote_device = 0;  // the peer's device index (paired only)
    uint32_t slot = 0;           // its place in every striped lane (paired only)
    uint64_t rate_mbps = 0;      // min of both ends; 0 unknown
    bool paired = false;
    // Rejoin bookkeeping, under rejoin_mu_.
    uint64_t accepted_rate = 0;
    absl::Time accepted_at;
    RejoinBudget budget;
  };
  StripedLink(PeerIdentity peer, std::vector<LinkDevice> devices,
              std::vector<StripedWorker*> pollers, DeviceLinkSink add_device_link);
  // A per-device link on local device `device` with `lanes` QPs (INIT),
  // registered with its device.
  absl::StatusOr<std::shared_ptr<VerbsLink>> NewDeviceLink(uint32_t device, uint32_t lanes);
  absl::Status AddDeviceLink(uint32_t device, uint32_t lanes);
  // Builds the striped lanes over the paired device links; publishes them.
  void BuildStripes(uint32_t lanes, const PeerIdentity& peer);
  // A device link closed: the link breaks once no paired one is left.
  void OnDeviceLinkClosed();
  // A pair runs at its slower end's rate; unknown (0) if either end's is.
  static uint64_t PairRate(uint64_t ours, uint64_t theirs);
  // What both ends share, for rejoin offers and answers (no devices).
  LinkEndpoints Shared() const;
  // The striping weight of a pair of this rate: its rate if every pair's is
  // known, else equal shares.
  uint64_t Weight(uint64_t rate_mbps) const;
  // Puts `fresh` (connected) in service for pair `d`: every striped lane
  // gets its lane through its poller; the old link closes. False if it
  // could not (`fresh` broke meanwhile, or a poller's inbox is full).
  bool Install(DevicePairLink& d, std::shared_ptr<VerbsLink> fresh, uint64_t rate_mbps)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rejoin_mu_);
  // Stores `fresh` in `*slot` unless the link broke meanwhile; closes what
  // it replaces (and `fresh` if refused) outside mu_.
  void Keep(std::shared_ptr<VerbsLink>* slot, std::shared_ptr<VerbsLink> fresh);

  const std::vector<LinkDevice> devices_;
  const std::vector<StripedWorker*> pollers_;
  const DeviceLinkSink add_device_link_;
  // Serializes rejoin steps (control threads); taken before mu_.
  Mutex rejoin_mu_;
  // Guards the device links once published: Close and OnDeviceLinkClosed
  // (any thread, poller threads too) against rejoins replacing them.
  mutable Mutex mu_;
  std::vector<DevicePairLink> device_links_;  // the set is fixed once published
  std::vector<std::unique_ptr<StripedLane>> stripes_;
  std::atomic<uint32_t> lane_count_{0};
  std::atomic<bool> active_{false};
  // The READ depths offered (the transport's, the same on every device).
  const uint32_t max_rd_atomic_;
  const uint32_t max_dest_rd_atomic_;
};

}  // namespace xferd::transport::verbs
