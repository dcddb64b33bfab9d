// Engine: wiring of its parts, lifecycle and statistics.
#include "daemon/engine/engine.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/engine/peer_verify.h"
#include "daemon/engine/self_link.h"

namespace xferd::engine {
namespace {

// Threads for blocking control work. Two keep one slow handshake (a peer that
// does not answer) from holding up every other resolution.
constexpr int kControlThreads = 2;

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
  RETURN_IF_ERROR(engine->runner_.StartPollers(transport));
  return engine;
}

Engine::Engine(const EngineConfig& config, NodeIdentity self, transport::Transport& transport,
               memory::RegionRegistry& regions, PeerRpc& rpc)
    : config_(config),
      life_(std::move(self)),
      tenants_(config.tenants),
      transport_(transport),
      regions_(regions),
      executor_(kControlThreads),
      peers_(life_, transport, regions, rpc, executor_, timer_),
      planner_(config_, transport.kind(), regions, peers_),
      runner_(config_, timer_),
      admission_(life_, tenants_, peers_, planner_, runner_, rpc, executor_),
      region_control_(regions, transport, peers_, runner_, executor_) {
  // A failure the transport could not explain (a peer's NIC refusing access,
  // which a dead peer gives too): the peer is asked on the executor, and the
  // transfer ends with what that says.
  runner_.SetExplainer([this](std::shared_ptr<Transfer> t, absl::Status error) {
    executor_.Run([this, t = std::move(t), error = std::move(error)] {
      t->Finish(TransferState::kFailed, peers_.ExplainRefusal(*t->plan().peer, error));
    });
  });
  // A verified transfer over verbs, its ops done: its peer checksums its
  // side on the executor (peer_verify.h).
  runner_.SetVerifier([this, &rpc](std::shared_ptr<Transfer> t) {
    executor_.Run([this, &rpc, t = std::move(t)] { VerifyAtPeer(rpc, life_.self(), *t); });
  });
}

Engine::~Engine() { Stop(); }

void Engine::SetIdentity(std::string node_id, std::string address) {
  NodeIdentity self = life_.self();
  self.node_id = node_id;
  self.address = address;
  auto link = std::make_shared<SelfLink>(transport::PeerIdentity{node_id, self.incarnation},
                                         runner_.completion_sinks());
  peers_.InstallSelf(std::move(self), std::move(link));
  life_.SetIdentity(std::move(node_id), std::move(address));
  peers_.StartRejoins();
}

void Engine::ConnectPeer(const std::string& address, absl::Duration timeout,
                         Callback<PeerInfo> done) {
  const absl::Time deadline = absl::Now() + timeout;
  executor_.Run([this, address, deadline, done = std::move(done)] {
    done(peers_.Connect(address, deadline));
  });
}

absl::StatusOr<uint32_t> Engine::DisconnectPeer(const std::string& node_or_address,
                                                const Tenant& tenant) {
  if (std::shared_ptr<Peer> found = peers_.Find(node_or_address);
      found != nullptr && tenants_.configured() && !tenant.admin()) {
    const Tenant* other = nullptr;
    runner_.EachInFlight([&](const Transfer& t) {
      if (t.plan().peer == found && t.plan().spec.tenant != &tenant) other = t.plan().spec.tenant;
    });
    if (other != nullptr) {
      return tenant.Denied(absl::StrCat("tenant '", tenant.name(), "' may not disconnect peer '",
                                        found->node_id(), "': transfers of tenant '",
                                        other->name(), "' are in flight with it"));
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Peer> peer, peers_.Remove(node_or_address));
  const absl::Status reason = absl::UnavailableError(
      absl::StrCat("peer '", peer->node_id(), "' was disconnected on request"));
  const uint32_t failed =
      runner_.EndWhere([&](const Transfer& t) { return t.plan().peer == peer; }, reason);
  spdlog::info("peer disconnected node={} failed_transfers={}", peer->node_id(), failed);
  peers_.FarewellAndClose(std::move(peer));
  return failed;
}

std::vector<PeerInfo> Engine::ListPeers() const {
  std::vector<PeerInfo> out;
  for (const std::shared_ptr<Peer>& peer : peers_.List()) out.push_back(peer->Info());
  return out;
}

void Engine::ServeResolve(const std::string& node_id, uint64_t incarnation, uint64_t link_id,
                          const std::string& region, absl::Time deadline,
                          Callback<ResolvedRegion> done) {
  executor_.Run([this, node_id, incarnation, link_id, region, deadline, done = std::move(done)] {
    done(peers_.ResolveForPeer(node_id, incarnation, link_id, region, deadline));
  });
}

uint32_t Engine::FailAll(const absl::Status& reason) {
  return runner_.EndWhere([](const Transfer&) { return true; }, reason);
}

void Engine::Stop() {
  if (!life_.MarkStopped()) return;
  FailAll(absl::UnavailableError("daemon is shutting down"));
  executor_.Stop();
  timer_.Stop();
  // Closing links makes the pollers fail what is still posted; the runner
  // lets them hand those completions back before they stop, then finishes
  // what its notes thread was told.
  transport_.Shutdown();
  runner_.Stop();
}

EngineStats Engine::Stats() const {
  EngineStats stats;
  stats.transfers = runner_.counters();
  peers_.AddStats(&stats);
  stats.landed_events = regions_.landed_events();
  stats.transport = transport_.stats();
  stats.regions = static_cast<uint32_t>(regions_.count());
  stats.registered_bytes = regions_.registered_bytes();
  stats.pollers = runner_.poller_stats();
  for (const auto& tenant : tenants_.all()) {
    TenantStats t = tenant->Stats();
    t.registered_bytes = regions_.registered_bytes(t.name);
    stats.tenants.push_back(std::move(t));
  }
  return stats;
}

}  // namespace xferd::engine
