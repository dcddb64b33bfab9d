// Engine lifecycle, regions and statistics. Peers: engine_peers.cc;
// transfers: engine_transfers.cc.
#include "daemon/engine/engine.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"
#include "daemon/common/status_macros.h"

namespace xferd::engine {
namespace {

// Threads for blocking control work. Two keep one slow handshake (a peer that
// does not answer) from holding up every other resolution.
constexpr int kControlThreads = 2;
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
    cancelled = CancelWhere(
        [&](const Transfer& t) { return t.plan().src == region; },
        absl::CancelledError(absl::StrCat("source region '", name, "' was deregistered")));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<memory::Region> removed, regions_.Remove(name, force));
  spdlog::info("region deregistered name={} id={} cancelled_transfers={}", name, removed->id(),
               cancelled);
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
  {
    MutexLock lock(&mu_);
    stats.bytes_sent = closed_bytes_sent_;
    stats.bytes_received = closed_bytes_received_;
    stats.rejected_writes = closed_rejected_;
  }
  for (const std::shared_ptr<Peer>& peer : peers_.List()) {
    const transport::LinkCounters& c = peer->link()->counters();
    stats.bytes_sent += c.bytes_sent.load(std::memory_order_relaxed);
    stats.bytes_received += c.bytes_received.load(std::memory_order_relaxed);
    stats.rejected_writes += c.writes_rejected.load(std::memory_order_relaxed);
    ++stats.peers;
    if (!peer->link()->broken()) stats.lanes += peer->link()->lane_count();
  }
  for (const std::shared_ptr<memory::Region>& region : regions_.List()) {
    stats.landed_events += region->landed().published();
  }
  stats.transport = transport_.stats();
  stats.regions = static_cast<uint32_t>(regions_.count());
  stats.registered_bytes = regions_.registered_bytes();
  for (uint32_t i = 0; i < pollers_->size(); ++i) stats.pollers.push_back(pollers_->at(i).stats());
  return stats;
}

void Engine::OnTransferFinished(const Transfer& transfer) {
  table_.OnFinished(transfer);
  const TransferInfo info = transfer.Info();
  if (info.state == TransferState::kDone) {
    SPDLOG_DEBUG("transfer id={} done bytes={}", info.id, info.spec.length);
    return;
  }
  // The peer no longer knows the region: forget its key before the next write.
  if (info.error.code() == absl::StatusCode::kNotFound) {
    transfer.plan().peer->ForgetRegion(info.spec.dst_region);
  }
  spdlog::info("transfer id={} {} peer={} dst={} bytes_done={}/{}: {}", info.id,
               TransferStateName(info.state), transfer.plan().peer->node_id(), info.spec.dst_region,
               info.bytes_done, info.spec.length, info.error.message());
}

}  // namespace xferd::engine
