// Engine lifecycle, regions and statistics. Peers: engine_peers.cc;
// transfers: engine_transfers.cc.
#include "daemon/engine/engine.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"

namespace xferd::engine {
namespace {

// Threads for blocking control work. Two keep one slow handshake (a peer that
// does not answer) from holding up every other resolution.
constexpr int kControlThreads = 2;
// Sweeps after a transfer ended still held: 10 ms, doubling, up to ~2.5 s.
constexpr absl::Duration kFirstSweepDelay = absl::Milliseconds(10);
constexpr absl::Duration kLastSweepDelay = absl::Milliseconds(1280);
// Bound on the courtesy calls made when going away or deregistering.
constexpr absl::Duration kNotifyTimeout = absl::Seconds(2);

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineConfig& config,
                                                       NodeIdentity self,
                                                       transport::Transport& transport,
                                                       memory::RegionRegistry& regions,
                                                       PeerRpc& rpc) {
  if (transport.lanes_per_link() != config.pollers) {
    return absl::InternalError("transport built for a different poller count");
  }
  auto engine =
      std::unique_ptr<Engine>(new Engine(config, std::move(self), transport, regions, rpc));
  PollerOptions options;
  options.spin = config.spin;
  options.max_transfers = config.max_inflight_transfers;
  ASSIGN_OR_RETURN(engine->pollers_, PollerPool::Create(transport, config.pollers, options));
  engine->pollers_->Start();
  return engine;
}

Engine::Engine(const EngineConfig& config, NodeIdentity self, transport::Transport& transport,
               memory::RegionRegistry& regions, PeerRpc& rpc)
    : config_(config),
      self_(std::move(self)),
      transport_(transport),
      regions_(regions),
      rpc_(rpc),
      table_(config.max_inflight_transfers, config.history),
      executor_(kControlThreads) {}

Engine::~Engine() { Stop(); }

void Engine::SetIdentity(std::string node_id, std::string address) {
  XFERD_CHECK(!ready());
  self_.node_id = std::move(node_id);
  self_.address = std::move(address);
  ready_.store(true, std::memory_order_release);
  // Only links striped over several devices have pairs that can rejoin; an
  // engine without them keeps its timer idle.
  if (transport_.stripes_devices()) ScheduleRejoins();
}

void Engine::RegisterRegion(memory::RegionSpec spec,
                            Callback<std::shared_ptr<memory::Region>> done) {
  // Mapping and pinning gigabytes takes a while: not on a gRPC thread.
  executor_.Run([this, spec = std::move(spec), done = std::move(done)]() mutable {
    const std::string name = spec.name;
    absl::StatusOr<std::shared_ptr<memory::Region>> region =
        regions_.Register(std::move(spec), &transport_);
    if (region.ok()) {
      spdlog::info("region registered name={} size={} id={}", name, (*region)->size(),
                   (*region)->id());
      if (RegionObserver* observer = region_observer_.load(std::memory_order_acquire)) {
        observer->OnRegionsChanged();
      }
    }
    done(std::move(region));
  });
}

absl::StatusOr<uint32_t> Engine::DeregisterRegion(const std::string& name, bool force,
                                                  std::function<void(uint32_t)> peers_told) {
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr) return absl::NotFoundError(absl::StrCat("no region named '", name, "'"));
  uint32_t cancelled = 0;
  if (force) {
    // The region is a write's source and a read's destination: say which.
    for (const transport::OpKind kind : {transport::OpKind::kWrite, transport::OpKind::kRead}) {
      const bool read = kind == transport::OpKind::kRead;
      cancelled += CancelWhere(
          [&](const Transfer& t) { return t.plan().local == region && t.plan().kind == kind; },
          absl::CancelledError(absl::StrCat(read ? "destination region '" : "source region '", name,
                                            "' was deregistered", read ? " under the read" : "")));
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<memory::Region> removed, regions_.Remove(name, force));
  // Peers' keys die now, not when the last local user lets go of the memory.
  transport_.RevokeRegion(*removed, nullptr);
  spdlog::info("region deregistered name={} id={} cancelled_transfers={}", name, removed->id(),
               cancelled);
  if (RegionObserver* observer = region_observer_.load(std::memory_order_acquire)) {
    observer->OnRegionsChanged();
  }
  NotifyInvalidated(removed->id(), name, [peers_told = std::move(peers_told), cancelled] {
    if (peers_told) peers_told(cancelled);
  });
  // Finished transfers that read from the region must let go of it for its
  // memory to be released; their last completions may take a moment.
  executor_.Run([this] {
    for (int i = 0; i < 200 && table_.Sweep() > 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  });
  return cancelled;
}

void Engine::SetRegionAcl(const std::string& name, std::vector<std::string> peers,
                          Callback<std::shared_ptr<memory::Region>> done) {
  if (absl::Status s = memory::RegionRegistry::ValidateAcl(peers); !s.ok()) return done(s);
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr) return done(absl::NotFoundError(absl::StrCat("no region named '", name, "'")));
  region->SetAllowedPeers(std::move(peers));
  // After the change: a resolution checks the ACL again once its keys are
  // bound, so one that raced with this sees it, or is listed here.
  std::vector<std::shared_ptr<Peer>> dropped;
  {
    MutexLock lock(&mu_);
    if (auto it = resolved_by_.find(region->id()); it != resolved_by_.end()) {
      absl::erase_if(it->second, [&](const std::string& node) {
        if (region->PeerAllowed(node)) return false;
        if (std::shared_ptr<Peer> peer = peers_.Find(node)) dropped.push_back(std::move(peer));
        return true;
      });
    }
  }
  for (const std::shared_ptr<Peer>& peer : dropped) {
    transport_.RevokeRegion(*region, peer->link().get());
  }
  spdlog::info("region ACL changed name={} allowed_peers=[{}] revoked_from={}", name,
               absl::StrJoin(region->allowed_peers(), ","), dropped.size());
  if (RegionObserver* observer = region_observer_.load(std::memory_order_acquire)) {
    observer->OnRegionsChanged();
  }
  // So their cached keys go before they write (the next resolution is
  // refused); over TCP every write is checked against the ACL anyway.
  if (dropped.empty()) return done(std::move(region));
  executor_.Run([this, dropped = std::move(dropped), region = std::move(region), name,
                 done = std::move(done)] {
    for (const std::shared_ptr<Peer>& peer : dropped) {
      absl::Status s = rpc_.InvalidateRegion(peer->node().address, self_, region->id(), name,
                                             absl::Now() + kNotifyTimeout);
      if (!s.ok()) spdlog::debug("telling {} region {} closed to it failed: {}", peer->node_id(),
                                 name, s);
    }
    done(region);
  });
}

void Engine::BeginDrain() {
  MutexLock lock(&mu_);
  draining_ = true;
}

bool Engine::draining() const {
  MutexLock lock(&mu_);
  return draining_;
}

bool Engine::WaitIdle(absl::Time deadline) {
  while (table_.counters().in_flight > 0) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

uint32_t Engine::FailAll(const absl::Status& reason) {
  return CancelWhere([](const Transfer&) { return true; }, reason);
}

uint32_t Engine::CancelWhere(const std::function<bool(const Transfer&)>& match,
                             const absl::Status& reason) {
  uint32_t ended = 0;
  const TransferState state = reason.code() == absl::StatusCode::kCancelled
                                  ? TransferState::kCancelled
                                  : TransferState::kFailed;
  for (const std::shared_ptr<Transfer>& t : table_.InFlight()) {
    if (match(*t) && t->Finish(state, reason)) ++ended;
  }
  return ended;
}

void Engine::SayGoodbye(const std::string& reason, absl::Time deadline) {
  for (const std::shared_ptr<Peer>& peer : peers_.List()) {
    if (peer->link()->broken()) continue;
    absl::Status s = rpc_.Goodbye(peer->node().address, self_, reason,
                                  std::min(deadline, absl::Now() + kNotifyTimeout));
    if (!s.ok()) spdlog::debug("goodbye to {} failed: {}", peer->node_id(), s);
  }
}

void Engine::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    draining_ = true;
  }
  FailAll(absl::UnavailableError("daemon is shutting down"));
  executor_.Stop();
  deadlines_.Stop();
  // Closing links makes the pollers fail what is still posted; give them a
  // moment to hand those completions back before they stop.
  transport_.Shutdown();
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  while (table_.Sweep() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  if (pollers_ != nullptr) pollers_->Stop();
}

EngineStats Engine::Stats() const {
  EngineStats stats;
  stats.transfers = table_.counters();
  std::vector<std::shared_ptr<Peer>> peers;
  {
    // Retired totals and the peer list together: a peer is retired and
    // removed under mu_, so each link is counted exactly once.
    MutexLock lock(&mu_);
    stats.traffic = closed_traffic_;
    peers = peers_.List();
  }
  for (const std::shared_ptr<Peer>& peer : peers) {
    const transport::LinkCounters& c = peer->link()->counters();
    PeerTraffic& traffic = stats.traffic[peer->node_id()];
    traffic.bytes_sent += c.bytes_sent.load(std::memory_order_relaxed);
    traffic.bytes_received += c.bytes_received.load(std::memory_order_relaxed);
    traffic.rejected_writes += c.writes_rejected.load(std::memory_order_relaxed);
    ++stats.peers;
    if (!peer->link()->broken()) stats.lanes += peer->link()->lane_count();
  }
  for (const auto& [node, traffic] : stats.traffic) {
    stats.bytes_sent += traffic.bytes_sent;
    stats.bytes_received += traffic.bytes_received;
    stats.rejected_writes += traffic.rejected_writes;
  }
  stats.landed_events = regions_.landed_events();
  stats.transport = transport_.stats();
  stats.regions = static_cast<uint32_t>(regions_.count());
  stats.registered_bytes = regions_.registered_bytes();
  for (uint32_t i = 0; i < pollers_->size(); ++i) stats.pollers.push_back(pollers_->at(i).stats());
  return stats;
}

void Engine::SetTransferRecorder(TransferRecorder* recorder) {
  recorder_.store(recorder, std::memory_order_release);
}

void Engine::SetRegionObserver(RegionObserver* observer) {
  region_observer_.store(observer, std::memory_order_release);
}

void Engine::SetNodeDirectory(NodeDirectory* directory) {
  node_directory_.store(directory, std::memory_order_release);
}

void Engine::OnTransferEnding(const Transfer& transfer, const TransferInfo& outcome) {
  table_.Count(outcome);
  if (TransferRecorder* recorder = recorder_.load(std::memory_order_acquire)) {
    recorder->RecordTransfer(outcome);
  }
  // The peer no longer knows the region: forget its key before the next write.
  if (outcome.error.code() == absl::StatusCode::kNotFound) {
    transfer.plan().peer->ForgetRegion(RemoteRegionName(outcome.spec));
  }
}

// The end of a transfer's life in the log, as key=value pairs after the
// event: done at debug (one line per transfer must not cost a write on the
// poller at the default level, nor its formatting), cancelled at info,
// failed at warn.
void Engine::OnTransferFinished(const Transfer&, const TransferInfo& info) {
  if (table_.Retire(info.id) > 0) SweepLater(kFirstSweepDelay);
  const bool done = info.state == TransferState::kDone;
  if (done && !spdlog::should_log(spdlog::level::debug)) return;
  const absl::Duration duration = info.finished_at - info.submitted_at;
  const absl::string_view transport = transport::TransportKindName(info.transport);
  if (done) {
    spdlog::debug("transfer id={} done peer={} transport={} bytes={} duration={}", info.id,
                  info.peer_node, transport, info.bytes_done, absl::FormatDuration(duration));
    return;
  }
  spdlog::log(info.state == TransferState::kCancelled ? spdlog::level::info : spdlog::level::warn,
              "transfer id={} {} direction={} peer={} transport={} dst={} bytes={}/{} duration={} "
              "code={} error={:?}",
              info.id, TransferStateName(info.state), IsRead(info.spec) ? "read" : "write",
              info.peer_node, transport, info.spec.dst_region, info.bytes_done, info.spec.length,
              absl::FormatDuration(duration), absl::StatusCodeToString(info.error.code()),
              info.error.message());
}

// A transfer that just ended is usually still held by the thread that ended
// it, or by completions still on their way, so Retire cannot reduce it to its
// snapshot yet. Until something reduces it, its block plan (24 bytes a block)
// stays resident: on a daemon that goes idle after a big transfer, nothing
// would. So sweep again shortly after, backing off while something still
// holds a transfer, and give up after a few seconds (a client holding one
// that long lets go before long, and the next transfer's end sweeps again).
void Engine::SweepLater(absl::Duration delay) {
  if (delay == kFirstSweepDelay && sweep_pending_.exchange(true)) return;
  deadlines_.RunAt(absl::Now() + delay, [this, delay] {
    if (table_.Sweep() > 0 && delay < kLastSweepDelay) {
      SweepLater(delay * 2);
      return;
    }
    sweep_pending_.store(false);
  });
}

}  // namespace xferd::engine
