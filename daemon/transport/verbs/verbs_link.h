// A verbs link on one device pair: one RC queue pair per lane, plus the
// notice rings through which each side learns that a transfer from the
// other has fully landed. A StripedLink holds one per device pair and is
// what the engine sees; this one breaks alone when its device fails.
// The initiator creates its QPs first (their numbers go into the
// handshake); the responder creates and activates its own from the answer;
// then the initiator activates (RTR/RTS) towards the responder's. With
// memory windows, what the peer may write here (the notice ring, the
// regions granted to it) is reachable only through this link's queue pairs.
// A peer writes a notice only after it resolved a region on this link, and
// that grant's binds run after the ring's on every lane's send queue: the
// ring is bound before any notice can arrive.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/memory_windows.h"
#include "daemon/transport/verbs/queue_pair.h"
#include "daemon/transport/verbs/verbs_context.h"
#include "daemon/transport/verbs/verbs_lane.h"
#include "daemon/transport/verbs/verbs_registration.h"

namespace xferd::transport::verbs {

class VerbsWorker;

struct VerbsLinkSettings {
  QpPath path;
  uint32_t ops_depth = 64;
  uint32_t send_depth = 64 * kSendWrsPerOp;  // work requests per send queue
  uint32_t max_inline = 64;
  // What this side offers in the handshake (1..255): RDMA READs a queue pair
  // may have outstanding, and may serve at once.
  uint8_t max_rd_atomic = 1;
  uint8_t max_dest_rd_atomic = 1;
  // Peers reach our memory through windows bound to their lanes' queue pairs.
  bool memory_windows = true;
};

class VerbsLink final : public Link, public std::enable_shared_from_this<VerbsLink> {
 public:
  // Creates `lanes` QPs (INIT, receives posted), one on each of the first
  // `lanes` workers, and the notice rings. Control thread. `owner` (the
  // striped link) counts the bytes, is kept alive while lanes drain, and
  // hears of this link's Close through `on_close`.
  static absl::StatusOr<std::shared_ptr<VerbsLink>> Create(
      std::shared_ptr<VerbsContext> context, std::vector<VerbsWorker*> workers,
      const VerbsLinkSettings& settings, PeerIdentity peer, uint32_t lanes, Link* owner,
      std::weak_ptr<Link> owner_alive, std::function<void()> on_close);
  ~VerbsLink() override;

  // Our endpoints on this device for the handshake.
  void Describe(DeviceEndpoints* out) const;
  // RTR/RTS towards the peer's queue pairs on its device `remote`; `link`
  // carries what both ends of the link share (lanes, READ depths). May trim
  // lanes the peer did not match.
  absl::Status Activate(const LinkEndpoints& link, const DeviceEndpoints& remote);
  void BindPeer(const PeerIdentity& peer) { set_peer(peer); }
  // Memory windows for a region granted to the peer, covering each of the
  // registration's MR chunks on this device for every lane: those of an
  // earlier grant while usable, else new ones, whose binds each lane's
  // poller posts (see MemoryWindows::Wait). Control thread. UNAVAILABLE
  // once the link is closed; RESOURCE_EXHAUSTED beyond the device's max_mw.
  absl::StatusOr<std::shared_ptr<MemoryWindows>> GrantWindows(
      const memory::Region& region, const VerbsRegistration& registration);
  // Releases the windows granted on region `region_id`, if any.
  void RevokeWindows(uint32_t region_id);
  VerbsContext& device() const { return *context_; }
  VerbsLane& verbs_lane(uint32_t index) { return *lanes_[index]; }
  uint32_t ops_depth() const { return settings_.ops_depth; }

  absl::Status Connect(const PeerIdentity& peer, const LinkEndpoints& remote,
                       absl::Time deadline) override;
  void Close(absl::Status reason) override;
  uint32_t lane_count() const override { return lane_count_.load(std::memory_order_acquire); }
  Lane& lane(uint32_t index) override { return *lanes_[index]; }
  bool ready() const override { return active_.load(std::memory_order_acquire) && !broken(); }

 private:
  VerbsLink(std::shared_ptr<VerbsContext> context, std::vector<VerbsWorker*> workers,
            const VerbsLinkSettings& settings, PeerIdentity peer, Link* owner,
            std::weak_ptr<Link> owner_alive, std::function<void()> on_close);
  absl::Status Build(uint32_t lanes);
  // Hands lane i to its worker for teardown, once.
  void Detach(uint32_t lane);
  // Has each lane's poller bind `windows` (one job per lane).
  void RequestBinds(const std::shared_ptr<MemoryWindows>& windows, uint32_t lanes);
  std::shared_ptr<Link> KeepAlive();
  // Every window granted on this link, and the ring's: the peer's keys stop
  // working here.
  void ReleaseWindows();

  const std::shared_ptr<VerbsContext> context_;
  const std::vector<VerbsWorker*> workers_;
  const VerbsLinkSettings settings_;
  Link* const owner_;
  const std::weak_ptr<Link> owner_alive_;
  const std::function<void()> on_close_;
  // Incoming records (lanes x kNoticeSlots) then outgoing ones, each half
  // registered on its own: peers may write only the incoming half.
  std::unique_ptr<uint8_t[]> ring_;
  uint32_t ring_lanes_ = 0;
  IbvMr ring_in_mr_;
  IbvMr ring_out_mr_;
  std::vector<std::unique_ptr<VerbsLane>> lanes_;
  // After the MR and the QPs they are bound to: released before either goes
  // (a device refuses to deregister an MR with windows bound to it, and
  // rxe stalls for long seconds destroying a QP that has some).
  std::shared_ptr<MemoryWindows> ring_windows_;  // lane i: its incoming slots
  std::atomic<uint32_t> lane_count_{0};
  std::atomic<bool> active_{false};

  Mutex mu_;
  std::vector<bool> detached_ ABSL_GUARDED_BY(mu_);
  // Regions granted on this link, by id (never reused); the registration
  // holds the windows, so they go with the region whatever this link does.
  absl::flat_hash_map<uint32_t, std::weak_ptr<MemoryWindows>> windows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::transport::verbs
