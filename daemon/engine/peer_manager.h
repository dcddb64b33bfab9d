// The engine's peers: handshakes both ways (one per address at a time),
// the directory of live links, resolving a peer's regions, goodbyes and
// disconnects, and the traffic of links that are gone. It also serves what
// peers ask of this daemon (peer_serving.cc: region keys, staged ranges,
// invalidations, goodbyes) and brings broken device pairs of live links back
// (peer_rejoin.cc). Blocking methods run on the control executor; the rest
// on any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/deadline_timer.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/lifecycle.h"
#include "daemon/engine/observers.h"
#include "daemon/engine/peer.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class PeerManager {
 public:
  // Every reference outlives the manager.
  PeerManager(const Lifecycle& life, transport::Transport& transport,
              memory::RegionRegistry& regions, PeerRpc& rpc, ControlExecutor& executor,
              DeadlineTimer& timer);

  // ---- the live peers (any thread) ----
  // By node id, else by address; null if unknown. This daemon's own node
  // id finds the self peer (InstallSelf).
  std::shared_ptr<Peer> Find(const std::string& node_or_address) const {
    // Installed before the identity is set (ready, a release): seen after.
    if (life_.ready() && self_ != nullptr && node_or_address == self_->node_id()) return self_;
    return peers_.Find(node_or_address);
  }
  std::vector<std::shared_ptr<Peer>> List() const { return peers_.List(); }
  // Where unknown node ids are looked up (null: nowhere); outlives its use.
  void SetNodeDirectory(NodeDirectory* directory);
  bool has_node_directory() const { return node_directory_.load() != nullptr; }

  // ---- connecting (control executor; block until `deadline`) ----
  // A node id of the directory, else an address; a live peer is returned
  // as it is.
  absl::StatusOr<PeerInfo> Connect(const std::string& node_or_address, absl::Time deadline);
  // A node never connected, at its address in the directory. NOT_FOUND
  // names where it looked.
  absl::Status ConnectNode(const std::string& node_id, absl::Time deadline);
  // A peer whose link broke (a fault, a restart) by a new handshake, at the
  // address the directory has for it now if it has one.
  absl::Status Reconnect(const Peer& peer, absl::Time deadline);
  // The peer's region `name` (ResolveRegion), checked against its link and
  // cached in `peer`. `role` ("source", "destination") heads its errors.
  absl::Status Resolve(Peer& peer, const std::string& name, absl::string_view role,
                       absl::Time deadline);
  // The callee's side of a handshake (PeerService, any thread).
  absl::StatusOr<HandshakeMessage> AcceptHandshake(const HandshakeMessage& request);
  // What `refused` (a failure on the link to `peer` its transport could not
  // explain: transport::IsAccessRefused) was, asking the peer (Ping, up to
  // 2 s): it died or restarted (UNAVAILABLE saying so), or it answers as the
  // same process and the refusal stands (its status, looked into).
  absl::Status ExplainRefusal(const Peer& peer, const absl::Status& refused);

  // ---- leaving ----
  // Takes the peer out of the directory (its traffic kept); NOT_FOUND.
  // Then FarewellAndClose tells it, on the executor, and closes its link.
  absl::StatusOr<std::shared_ptr<Peer>> Remove(const std::string& node_or_address);
  void FarewellAndClose(std::shared_ptr<Peer> peer);
  // Tells every live peer this daemon is going away (bounded, best effort).
  void SayGoodbye(const std::string& reason, absl::Time deadline);

  // ---- local regions peers know (any thread) ----
  // Tells the peers that resolved the region to forget it (on the
  // executor), then calls `then`.
  void NotifyInvalidated(uint32_t region_id, const std::string& name, std::function<void()> then);
  // The peers that resolved `region` and its ACL now leaves out (forgotten
  // as resolvers): their keys are to be revoked.
  std::vector<std::shared_ptr<Peer>> TakeExcludedResolvers(const memory::Region& region);
  // Tells `peers` to forget the region (InvalidateRegion, on the executor,
  // best effort, bounded), then calls `then` there.
  void TellInvalidated(std::vector<std::shared_ptr<Peer>> peers, uint32_t region_id,
                       std::string name, std::function<void()> then);

  // ---- this daemon as its own peer ----
  // Once, before the identity is set: the peer its node id names, over
  // `link` (the engine's SelfLink).
  void InstallSelf(NodeIdentity self, std::shared_ptr<transport::Link> link);
  // A key to this daemon's own region `name` for a transfer to the self
  // peer, with the checks a peer's resolution makes (NOT_FOUND, the ACL
  // naming this node id: PERMISSION_DENIED), prefixed with `role` ("source",
  // "destination"). Any thread (peer_serving.cc).
  absl::StatusOr<std::shared_ptr<const CachedKey>> ResolveOwn(const std::string& name,
                                                              absl::string_view role) const;

  // ---- serving peers (peer_serving.cc; PeerService threads) ----
  // What `node` needs to reach a local region over the link this daemon
  // calls `link_id` (0: its current one), blocking until `deadline` at most.
  absl::StatusOr<ResolvedRegion> ResolveForPeer(const std::string& node_id, uint64_t incarnation,
                                                uint64_t link_id, const std::string& region,
                                                absl::Time deadline);
  absl::Status OnRegionInvalidated(const std::string& node_id, uint64_t incarnation,
                                   uint32_t region_id, const std::string& region);
  absl::Status OnGoodbye(const std::string& node_id, uint64_t incarnation,
                         const std::string& reason);
  // A coming write's destination ranges for a local region.
  absl::Status OnStageRanges(const std::string& node_id, uint64_t incarnation,
                             const StagedRanges& ranges);
  // The checksums of a verified transfer's blocks of a local region,
  // packed; the write's landing raised as the query asks.
  absl::StatusOr<std::string> OnChecksumBlocks(const std::string& node_id, uint64_t incarnation,
                                               const ChecksumQuery& query);

  // ---- rejoins (peer_rejoin.cc) ----
  // From now on, every kRejoinPeriod each live link's broken device pairs
  // are offered to its peer, until the engine drains.
  void StartRejoins();
  absl::StatusOr<transport::LinkEndpoints> AcceptRejoin(const std::string& node_id,
                                                        uint64_t incarnation,
                                                        const transport::LinkEndpoints& offer);
  absl::Status OnCommitRejoin(const std::string& node_id, uint64_t incarnation,
                              const std::vector<uint32_t>& devices);

  // Peers, lanes and traffic by node (links that are gone included).
  void AddStats(EngineStats* stats) const;

 private:
  absl::StatusOr<PeerInfo> ConnectNow(const std::string& address, absl::Time deadline);
  // Connects `address`; FAILED_PRECONDITION unless the daemon there is `node_id`.
  absl::StatusOr<PeerInfo> ConnectNodeAt(const std::string& node_id, const std::string& address,
                                         absl::Time deadline);
  std::shared_ptr<Peer> Install(NodeIdentity node, bool outbound,
                                std::shared_ptr<transport::Link> link, uint64_t link_id,
                                uint64_t peer_link_id);
  // The peer of that incarnation, or null.
  std::shared_ptr<Peer> PeerFor(const std::string& node_id, uint64_t incarnation) const;
  // A local region a peer names as it resolved it (id and name), which
  // admits it.
  absl::StatusOr<std::shared_ptr<memory::Region>> RegionAsResolved(const std::string& node_id,
                                                                   uint64_t incarnation,
                                                                   uint32_t region_id,
                                                                   const std::string& name) const;
  // The peer whose link is `link_id` (0: any), waiting a little while it may
  // still be installed. FAILED_PRECONDITION: none; UNAVAILABLE: another.
  absl::StatusOr<std::shared_ptr<Peer>> PeerForLink(const std::string& node_id,
                                                    uint64_t incarnation, uint64_t link_id,
                                                    absl::Time deadline);
  // Keeps a departing peer's byte counts in the totals. The caller holds
  // mu_ across removing the peer and this, so AddStats never sees its link
  // counted twice or not at all.
  void RetireCountersLocked(const Peer& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RejoinBrokenPairs();
  void ScheduleRejoins();
  // The live peer of that incarnation and its link's rejoin steps;
  // FAILED_PRECONDITION if there is none or it has nothing to rejoin.
  struct Rejoinable {
    std::shared_ptr<Peer> peer;
    transport::LinkRejoin* rejoin;
  };
  absl::StatusOr<Rejoinable> RejoinableLink(const std::string& node_id,
                                            uint64_t incarnation) const;

  const Lifecycle& life_;
  transport::Transport& transport_;
  memory::RegionRegistry& regions_;
  PeerRpc& rpc_;
  ControlExecutor& executor_;
  DeadlineTimer& timer_;
  std::atomic<NodeDirectory*> node_directory_{nullptr};

  PeerDirectory peers_;
  std::shared_ptr<Peer> self_;  // InstallSelf, before ready
  mutable Mutex mu_;
  // Addresses being connected right now: one handshake per peer at a time.
  absl::flat_hash_set<std::string> connecting_ ABSL_GUARDED_BY(mu_);
  // Addresses of disconnected peers whose goodbye is still on its way, by
  // count: a new handshake with one waits for it, or the late goodbye (which
  // names the node, not the link) would end the new link.
  absl::flat_hash_map<std::string, int> saying_goodbye_ ABSL_GUARDED_BY(mu_);
  // Region id -> node ids that resolved it (told when it goes away).
  absl::flat_hash_map<uint32_t, absl::flat_hash_set<std::string>> resolved_by_ ABSL_GUARDED_BY(mu_);
  // Totals of links that are gone, by peer node id, so stats do not drop at
  // a reconnect.
  std::map<std::string, PeerTraffic> closed_traffic_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::engine
