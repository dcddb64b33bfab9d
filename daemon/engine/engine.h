// The engine: regions, peers and transfers of one daemon, above a transport.
// A thin front over its parts, which the service and main call through it:
// PeerManager (handshakes, links, what peers ask, rejoins), TransferPlanner
// (checks and plans requests, keeps layouts), Admission (requests into
// transfers), TransferRunner (transfers on the pollers, their ends and
// history) and RegionControl (registering, deregistering, ACLs). Blocking
// control work runs on its control executor; data moves on its pollers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/common/config.h"
#include "daemon/engine/admission.h"
#include "daemon/engine/callback.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/deadline_timer.h"
#include "daemon/engine/engine_stats.h"
#include "daemon/engine/lifecycle.h"
#include "daemon/engine/observers.h"
#include "daemon/engine/peer_manager.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/engine/region_control.h"
#include "daemon/engine/tenants.h"
#include "daemon/engine/transfer.h"
#include "daemon/engine/transfer_planner.h"
#include "daemon/engine/transfer_runner.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/device_info.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class Engine final {
 public:
  // Starts the pollers. `transport`, `regions` and `rpc` outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineConfig& config,
                                                        NodeIdentity self,
                                                        transport::Transport& transport,
                                                        memory::RegionRegistry& regions,
                                                        PeerRpc& rpc);
  ~Engine();

  // Valid once ready(): fixed by SetIdentity and never changed after.
  const NodeIdentity& self() const { return life_.self(); }
  const EngineConfig& config() const { return config_; }
  // What the service and metrics report of the transport (any thread): its
  // kind, the RDMA device and port in use ("rxe0:1"; empty and none on TCP).
  transport::TransportKind transport_kind() const { return transport_.kind(); }
  std::string transport_device() const { return transport_.device(); }
  std::optional<transport::RdmaPortInUse> rdma_port() const { return transport_.rdma_port(); }
  // The host's RDMA devices (whatever the transport), for ListDevices: an
  // empty list without RDMA or without a query. Any thread.
  absl::StatusOr<std::vector<transport::DeviceInfo>> HostDevices() const {
    if (!device_query_) return std::vector<transport::DeviceInfo>{};
    return device_query_();
  }
  // Where HostDevices() looks: main sets it once, before serving.
  void SetDeviceQuery(transport::DeviceQuery query) { device_query_ = std::move(query); }
  // The node id may default to "host:port" and the address peers call back
  // is known only once the gRPC server has bound: main sets both here, once,
  // and the engine then accepts peers (before that they get UNAVAILABLE).
  void SetIdentity(std::string node_id, std::string address);
  bool ready() const { return life_.ready(); }

  // ---- regions (any thread; RegionControl) ----
  std::shared_ptr<memory::Region> FindRegion(absl::string_view name) const {
    return regions_.Find(name);
  }
  std::vector<std::shared_ptr<memory::Region>> ListRegions() const { return regions_.List(); }
  // The region as `tenant` may use it: NOT_FOUND, or PERMISSION_DENIED
  // naming its owner.
  absl::StatusOr<std::shared_ptr<memory::Region>> FindRegionFor(absl::string_view name,
                                                                const Tenant& tenant) const {
    return region_control_.FindFor(name, tenant);
  }
  // `spec.owner` is the tenant registering it.
  void RegisterRegion(memory::RegionSpec spec, Callback<std::shared_ptr<memory::Region>> done) {
    region_control_.Register(std::move(spec), std::move(done));
  }
  absl::StatusOr<uint32_t> DeregisterRegion(const std::string& name, const Tenant& tenant,
                                            bool force,
                                            std::function<void(uint32_t)> peers_told = nullptr) {
    return region_control_.Deregister(name, tenant, force, std::move(peers_told));
  }
  void SetRegionAcl(const std::string& name, const Tenant& tenant, std::vector<std::string> peers,
                    Callback<std::shared_ptr<memory::Region>> done) {
    region_control_.SetAcl(name, tenant, std::move(peers), std::move(done));
  }

  // ---- tenants (fixed from [tenants]) ----
  const Tenants& tenants() const { return tenants_; }

  // ---- peers (PeerManager) ----
  void ConnectPeer(const std::string& address, absl::Duration timeout, Callback<PeerInfo> done);
  // Returns the transfers that failed with it. With [tenants], `tenant`
  // may not while another tenant's transfers are in flight on that peer
  // (PERMISSION_DENIED): they would fail with it.
  absl::StatusOr<uint32_t> DisconnectPeer(const std::string& node_or_address,
                                          const Tenant& tenant);
  std::vector<PeerInfo> ListPeers() const;
  // PeerService: the callee's side of a handshake, and of the other calls.
  absl::StatusOr<HandshakeMessage> AcceptHandshake(const HandshakeMessage& request) {
    return peers_.AcceptHandshake(request);
  }
  absl::StatusOr<ResolvedRegion> ResolveForPeer(const std::string& node_id, uint64_t incarnation,
                                                uint64_t link_id, const std::string& region,
                                                absl::Time deadline) {
    return peers_.ResolveForPeer(node_id, incarnation, link_id, region, deadline);
  }
  // ResolveForPeer on the control executor, answered there.
  void ServeResolve(const std::string& node_id, uint64_t incarnation, uint64_t link_id,
                    const std::string& region, absl::Time deadline, Callback<ResolvedRegion> done);
  absl::Status OnRegionInvalidated(const std::string& node_id, uint64_t incarnation,
                                   uint32_t region_id, const std::string& region) {
    return peers_.OnRegionInvalidated(node_id, incarnation, region_id, region);
  }
  absl::Status OnGoodbye(const std::string& node_id, uint64_t incarnation,
                         const std::string& reason) {
    return peers_.OnGoodbye(node_id, incarnation, reason);
  }
  absl::StatusOr<std::string> OnChecksumBlocks(const std::string& node, uint64_t incarnation,
                                               const ChecksumQuery& query) {
    return peers_.OnChecksumBlocks(node, incarnation, query);
  }
  absl::Status OnStageRanges(const std::string& node, uint64_t incarnation,
                             const StagedRanges& ranges) {
    return peers_.OnStageRanges(node, incarnation, ranges);
  }
  absl::StatusOr<transport::LinkEndpoints> AcceptRejoin(const std::string& node_id,
                                                        uint64_t incarnation,
                                                        const transport::LinkEndpoints& offer) {
    return peers_.AcceptRejoin(node_id, incarnation, offer);
  }
  absl::Status OnCommitRejoin(const std::string& node_id, uint64_t incarnation,
                              const std::vector<uint32_t>& devices) {
    return peers_.OnCommitRejoin(node_id, incarnation, devices);
  }

  // ---- prepared layouts (TransferPlanner) ----
  absl::StatusOr<std::shared_ptr<const Layout>> PrepareLayout(Layout layout, const Tenant& tenant) {
    return planner_.PrepareLayout(std::move(layout), tenant);
  }
  absl::Status DeleteLayout(const std::string& name, const Tenant& tenant) {
    return planner_.DeleteLayout(name, tenant);
  }
  std::vector<std::shared_ptr<const Layout>> ListLayouts() const {
    return planner_.ListLayouts();
  }

  // ---- transfers (Admission, TransferRunner) ----
  void Submit(std::vector<TransferSpec> specs, bool batch,
              Callback<std::vector<std::shared_ptr<Transfer>>> done) {
    admission_.Submit(std::move(specs), batch, std::move(done));
  }
  std::shared_ptr<Transfer> FindTransfer(uint64_t id) const { return runner_.FindLive(id); }
  absl::StatusOr<TransferInfo> GetTransfer(uint64_t id) const { return runner_.Get(id); }
  absl::StatusOr<TransferInfo> CancelTransfer(uint64_t id) { return runner_.Cancel(id); }
  std::vector<TransferInfo> ListTransfers(const TransferFilter& filter) const {
    return runner_.List(filter);
  }
  // Ends every transfer in flight that `match`es with `reason` (a local
  // client gone); returns how many.
  uint32_t EndTransfersWhere(const std::function<bool(const Transfer&)>& match,
                             const absl::Status& reason) {
    return runner_.EndWhere(match, reason);
  }
  // A poll source (a local client's ring) served on a poller from now on
  // (TransferRunner::AttachSource).
  uint32_t AttachSource(std::shared_ptr<PollSource> source) {
    return runner_.AttachSource(std::move(source));
  }
  void DetachSource(uint32_t poller, std::shared_ptr<PollSource> source) {
    runner_.DetachSource(poller, std::move(source));
  }

  // ---- lifecycle ----
  // New transfers are refused with UNAVAILABLE from now on.
  void BeginDrain() { life_.BeginDrain(); }
  bool draining() const { return life_.draining(); }
  // Waits until no transfer is in flight or the deadline passes; true if idle.
  bool WaitIdle(absl::Time deadline) const { return runner_.WaitIdle(deadline); }
  // Ends every transfer in flight with `reason`; returns how many.
  uint32_t FailAll(const absl::Status& reason);
  // Tells every peer this daemon is going away (best effort, bounded).
  void SayGoodbye(const std::string& reason, absl::Time deadline) {
    peers_.SayGoodbye(reason, deadline);
  }
  // Stops executor, timer, pollers and the notes thread; closes links.
  // Every end decided before it returns has reached the recorder and the
  // observers by then. Idempotent.
  void Stop();

  EngineStats Stats() const;
  // Set (or clear, with null) who hears of transfers' ends (set before
  // transfers start, cleared after Stop) and of region changes, and where
  // unknown node ids are looked up (without one, peers are connected by
  // address first). Each outlives its registration.
  void SetTransferRecorder(TransferRecorder* recorder) { runner_.SetRecorder(recorder); }
  void SetRegionObserver(RegionObserver* observer) { region_control_.SetObserver(observer); }
  void SetNodeDirectory(NodeDirectory* directory) { peers_.SetNodeDirectory(directory); }

 private:
  Engine(const EngineConfig& config, NodeIdentity self, transport::Transport& transport,
         memory::RegionRegistry& regions, PeerRpc& rpc);

  const EngineConfig config_;
  Lifecycle life_;
  const Tenants tenants_;
  transport::Transport& transport_;
  memory::RegionRegistry& regions_;
  // Declared in dependency order: each part uses only those above it.
  DeadlineTimer timer_;
  ControlExecutor executor_;
  PeerManager peers_;
  TransferPlanner planner_;
  TransferRunner runner_;
  Admission admission_;
  RegionControl region_control_;
  transport::DeviceQuery device_query_;
};

}  // namespace xferd::engine
