// The engine: regions, peers and transfers of one daemon, above a transport.
// service/ calls it from gRPC threads; it validates, queues and answers from
// completion callbacks. Blocking control work (handshakes, resolutions, large
// registrations) runs on its control executor; data moves on its pollers.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/common/config.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/deadline_timer.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/layouts.h"
#include "daemon/engine/observers.h"
#include "daemon/engine/peer.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/engine/poller.h"
#include "daemon/engine/transfer.h"
#include "daemon/engine/transfer_table.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

template <typename T>
using Callback = std::function<void(absl::StatusOr<T>)>;

class Engine final : public TransferListener {
 public:
  // Starts the pollers. `transport`, `regions` and `rpc` outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        NodeIdentity self,
                                                        transport::Transport& transport,
                                                        memory::RegionRegistry& regions,
                                                        PeerRpc& rpc);
  ~Engine() override;

  // Valid once ready(): fixed by SetIdentity and never changed after.
  const NodeIdentity& self() const { return self_; }
  const EngineConfig& config() const { return config_; }
  // What the service and metrics report of the transport (any thread): its
  // kind, the RDMA device and port in use ("rxe0:1"; empty and none on TCP).
  transport::TransportKind transport_kind() const { return transport_.kind(); }
  std::string transport_device() const { return transport_.device(); }
  std::optional<transport::RdmaPortInUse> rdma_port() const { return transport_.rdma_port(); }
  // The local regions (any thread): the one named `name` (null if none), all.
  std::shared_ptr<memory::Region> FindRegion(absl::string_view name) const {
    return regions_.Find(name);
  }
  std::vector<std::shared_ptr<memory::Region>> ListRegions() const { return regions_.List(); }
  // The node id may default to "host:port" and the address peers call back
  // is known only once the gRPC server has bound: main sets both here, once,
  // and the engine then accepts peers (before that they get UNAVAILABLE).
  void SetIdentity(std::string node_id, std::string address);
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  // ---- regions (any thread) ----
  // Maps and registers on the control executor; `done` gets the region.
  void RegisterRegion(memory::RegionSpec spec, Callback<std::shared_ptr<memory::Region>> done);
  // Returns transfers cancelled (force). Revokes its keys, tells the peers
  // that resolved it, then calls `peers_told` (if set; executor or inline)
  // with that count: a write they start then re-resolves. Not on error.
  absl::StatusOr<uint32_t> DeregisterRegion(const std::string& name, bool force,
                                            std::function<void(uint32_t)> peers_told = nullptr);
  // Replaces a region's ACL (empty: any peer). Peers left out that resolved
  // it lose its keys at once and are told to forget them; then `done` gets
  // the region (executor or inline). INVALID_ARGUMENT, NOT_FOUND.
  void SetRegionAcl(const std::string& name, std::vector<std::string> peers,
                    Callback<std::shared_ptr<memory::Region>> done);

  // ---- peers (any thread) ----
  void ConnectPeer(const std::string& address, absl::Duration timeout, Callback<PeerInfo> done);
  absl::StatusOr<uint32_t> DisconnectPeer(const std::string& node_or_address);
  std::vector<PeerInfo> ListPeers() const;
  // PeerService: the callee's side of a handshake.
  absl::StatusOr<HandshakeMessage> AcceptHandshake(const HandshakeMessage& request);
  // PeerService: what `node` needs to write into a local region over the
  // link this daemon calls `link_id` (0: its current one; verbs: keys bound
  // to it now), blocking until `deadline` at most; ServeResolve runs it on
  // the control executor and calls `done` there.
  absl::StatusOr<ResolvedRegion> ResolveForPeer(const std::string& node_id, uint64_t incarnation,
                                                uint64_t link_id, const std::string& region,
                                                absl::Time deadline);
  void ServeResolve(const std::string& node_id, uint64_t incarnation, uint64_t link_id,
                    const std::string& region, absl::Time deadline, Callback<ResolvedRegion> done);
  absl::Status OnRegionInvalidated(const std::string& node_id, uint64_t incarnation,
                                   uint32_t region_id, const std::string& region);
  absl::Status OnGoodbye(const std::string& node_id, uint64_t incarnation,
                         const std::string& reason);
  // PeerService: a coming write's ranges for a region (engine_ranges.cc).
  absl::Status OnStageRanges(const std::string& node, uint64_t incarnation, const StagedRanges& r);
  // PeerService: a peer's rejoin of its link's broken device pairs
  // (engine_rejoin.cc): the offer answered, then the commit.
  absl::StatusOr<transport::LinkEndpoints> AcceptRejoin(const std::string& node_id,
                                                        uint64_t incarnation,
                                                        const transport::LinkEndpoints& offer);
  absl::Status OnCommitRejoin(const std::string& node_id, uint64_t incarnation,
                              const std::vector<uint32_t>& devices);

  // ---- prepared layouts (any thread) ----
  // Registers a layout. A local region's layout is checked against the
  // region now (OUT_OF_RANGE naming the block); a peer's is checked against
  // the region's size when a transfer uses it. Errors: INVALID_ARGUMENT,
  // ALREADY_EXISTS, NOT_FOUND (region or peer).
  absl::StatusOr<std::shared_ptr<const Layout>> PrepareLayout(Layout layout);
  absl::Status DeleteLayout(const std::string& name);
  std::vector<std::shared_ptr<const Layout>> ListLayouts() const { return layouts_.List(); }

  // ---- transfers (any thread) ----
  // Validates all writes and reads (all or nothing), then queues them.
  // `done` runs once they are queued or refused. batch: give them a batch
  // id.
  void Submit(std::vector<WriteSpec> writes, bool batch,
              Callback<std::vector<std::shared_ptr<Transfer>>> done);
  // The transfer while it is still kept whole (to watch it); null once only
  // its snapshot remains or if unknown.
  std::shared_ptr<Transfer> FindTransfer(uint64_t id) const;
  // Its state, live or from history. NOT_FOUND if unknown or evicted.
  absl::StatusOr<TransferInfo> GetTransfer(uint64_t id) const;
  absl::StatusOr<TransferInfo> CancelTransfer(uint64_t id);
  std::vector<TransferInfo> ListTransfers(const TransferFilter& filter) const;

  // ---- lifecycle ----
  // New writes are refused with UNAVAILABLE from now on.
  void BeginDrain();
  bool draining() const;
  // Waits until no transfer is in flight or the deadline passes; true if idle.
  bool WaitIdle(absl::Time deadline);
  // Ends every transfer in flight with `reason`; returns how many.
  uint32_t FailAll(const absl::Status& reason);
  // Tells every peer this daemon is going away (best effort, bounded).
  void SayGoodbye(const std::string& reason, absl::Time deadline);
  // Stops executor, timer and pollers; closes links. Idempotent.
  void Stop();

  EngineStats Stats() const;
  // Set (or clear, with null) who hears of transfers' ends (set before
  // transfers start, cleared after Stop) and of region changes, and where
  // unknown node ids are looked up (without one, peers are connected by
  // address first). Each outlives its registration.
  void SetTransferRecorder(TransferRecorder* recorder);
  void SetRegionObserver(RegionObserver* observer);
  void SetNodeDirectory(NodeDirectory* directory);

  // TransferListener: counts, records and forgets a vanished region's key
  // before the outcome is visible; then files and logs it.
  void OnTransferEnding(const Transfer& transfer, const TransferInfo& outcome) override;
  void OnTransferFinished(const Transfer& transfer, const TransferInfo& outcome) override;

 private:
  Engine(const EngineConfig& config, NodeIdentity self, transport::Transport& transport,
         memory::RegionRegistry& regions, PeerRpc& rpc);

  // engine_peers.cc
  absl::StatusOr<PeerInfo> ConnectNow(const std::string& address, absl::Time deadline);
  std::shared_ptr<Peer> InstallPeer(NodeIdentity node, bool outbound,
                                    std::shared_ptr<transport::Link> link, uint64_t link_id,
                                    uint64_t peer_link_id);
  std::shared_ptr<Peer> PeerFor(const std::string& node_id, uint64_t incarnation) const;
  // The peer whose link is `link_id` (0: any), waiting a little while it may
  // still be installed. FAILED_PRECONDITION: none; UNAVAILABLE: another.
  absl::StatusOr<std::shared_ptr<Peer>> PeerForLink(const std::string& node_id,
                                                    uint64_t incarnation, uint64_t link_id,
                                                    absl::Time deadline);
  // Keeps a departing peer's byte counts in the daemon's totals. The caller
  // holds mu_ across removing the peer from peers_ and this, so Stats()
  // never sees its link counted twice or not at all.
  void RetireCountersLocked(const Peer& peer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the peers that resolved the region to forget it, then calls `then`.
  void NotifyInvalidated(uint32_t region_id, const std::string& name, std::function<void()> then);

  // engine_rejoin.cc: every kRejoinPeriod, each live link's broken device
  // pairs are offered to its peer (transport::Link::OfferRejoin).
  void ScheduleRejoins();
  void RejoinBrokenPairs();

  // engine_layouts.cc: looks up the layouts a spec names and fills in its
  // region names from them.
  absl::Status BindLayouts(WriteSpec& spec) const;

  // engine_transfers.cc
  absl::Status CheckLocal(const WriteSpec& spec) const;
  // Whether every request's peer is connected and its remote key cached.
  bool Ready(const std::vector<WriteSpec>& writes) const;
  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> ResolveAndAdmit(
      const std::vector<WriteSpec>& writes, bool batch, absl::Time submitted_at);
  absl::Status ReconnectBroken(const std::vector<WriteSpec>& writes, absl::Time deadline);
  // Connects writes' unknown peers at their address in the node directory.
  absl::Status ConnectUnknown(const std::vector<WriteSpec>& writes, absl::Time deadline);
  // ConnectPeer's target: a node id of the directory, else an address.
  absl::StatusOr<PeerInfo> ConnectNodeOrAddress(const std::string& target, absl::Time deadline);
  // Connects `address`; FAILED_PRECONDITION unless the daemon there is `node_id`.
  absl::StatusOr<PeerInfo> ConnectNodeAt(const std::string& node_id, const std::string& address,
                                         absl::Time deadline);
  absl::Status ResolveMissing(const std::vector<WriteSpec>& writes, absl::Time deadline);
  // *stale: it failed because the peer's link broke or the remote key was
  // invalidated since resolution (resolving again may succeed).
  absl::StatusOr<Transfer::Plan> Plan(const WriteSpec& spec, RemoteKeySnapshot& keys,
                                      bool* stale) const;
  absl::StatusOr<ResolvedRegion> CheckRemote(const WriteSpec& spec, const Peer& peer,
                                             RemoteKeySnapshot& keys, bool* stale) const;
  absl::Status PlanMany(const WriteSpec& spec, const Peer& peer, uint64_t remote_size,
                        Transfer::Plan* plan) const;
  absl::StatusOr<std::vector<std::shared_ptr<Transfer>>> Admit(const std::vector<WriteSpec>& writes,
                                                               bool batch, absl::Time submitted_at,
                                                               bool* stale);
  void Launch(const std::shared_ptr<Transfer>& transfer);
  // Sweeps the transfer table after `delay` (see engine.cc).
  void SweepLater(absl::Duration delay);
  uint32_t CancelWhere(const std::function<bool(const Transfer&)>& match,
                       const absl::Status& reason);

  const EngineConfig config_;
  NodeIdentity self_;
  transport::Transport& transport_;
  memory::RegionRegistry& regions_;
  PeerRpc& rpc_;

  TransferTable table_;
  PeerDirectory peers_;
  LayoutRegistry layouts_;
  std::unique_ptr<PollerPool> pollers_;
  DeadlineTimer deadlines_;
  ControlExecutor executor_;

  std::atomic<bool> ready_{false};
  std::atomic<bool> sweep_pending_{false};
  mutable Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
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
  std::atomic<TransferRecorder*> recorder_{nullptr};
  std::atomic<RegionObserver*> region_observer_{nullptr};
  std::atomic<NodeDirectory*> node_directory_{nullptr};
};

}  // namespace xferd::engine
