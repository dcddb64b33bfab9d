// PeerManager: handshakes in both directions, resolving peers' regions,
// disconnects and goodbyes, and the resolvers of local regions.
#include "daemon/engine/peer_manager.h"

#include <sys/random.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"

namespace xferd::engine {
namespace {

// Bound on the courtesy calls made when going away or deregistering.
constexpr absl::Duration kNotifyTimeout = absl::Seconds(2);

absl::Status Prefixed(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(), absl::StrCat(prefix, status.message()));
}

// Random, so a stale link's id never matches a new one (0 means "any").
uint64_t NewLinkId() {
  uint64_t id = 0;
  while (id == 0) {
    while (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
    }
  }
  return id;
}

}  // namespace

PeerManager::PeerManager(const Lifecycle& life, transport::Transport& transport,
                         memory::RegionRegistry& regions, PeerRpc& rpc, ControlExecutor& executor,
                         DeadlineTimer& timer)
    : life_(life),
      transport_(transport),
      regions_(regions),
      rpc_(rpc),
      executor_(executor),
      timer_(timer) {}

void PeerManager::SetNodeDirectory(NodeDirectory* directory) {
  node_directory_.store(directory, std::memory_order_release);
}

absl::StatusOr<PeerInfo> PeerManager::Connect(const std::string& target, absl::Time deadline) {
  NodeDirectory* directory = node_directory_.load(std::memory_order_acquire);
  if (directory == nullptr || target.empty()) return ConnectNow(target, deadline);
  if (std::shared_ptr<Peer> known = peers_.Find(target);
      known != nullptr && !known->link()->broken()) {
    return known->Info();
  }
  absl::StatusOr<std::string> address = directory->AddressOf(target, deadline);
  // Not a node id of the directory: an address, as without one.
  if (absl::IsNotFound(address.status())) return ConnectNow(target, deadline);
  if (!address.ok()) return address.status();
  return ConnectNodeAt(target, *address, deadline);
}

absl::Status PeerManager::ConnectNode(const std::string& node, absl::Time deadline) {
  NodeDirectory* directory = node_directory_.load(std::memory_order_acquire);
  absl::StatusOr<std::string> address =
      directory != nullptr ? directory->AddressOf(node, deadline)
                           : absl::NotFoundError("no cluster directory is configured");
  if (!address.ok()) {
    if (!absl::IsNotFound(address.status())) return address.status();
    return absl::NotFoundError(absl::StrCat("no peer '", node, "' (by node id or address), and ",
                                            address.status().message()));
  }
  return ConnectNodeAt(node, *address, deadline).status();
}

absl::StatusOr<PeerInfo> PeerManager::ConnectNodeAt(const std::string& node_id,
                                                    const std::string& address,
                                                    absl::Time deadline) {
  ASSIGN_OR_RETURN(PeerInfo peer, ConnectNow(address, deadline));
  if (peer.node.node_id != node_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("the cluster directory names ", address, " for node '", node_id,
                     "', but the daemon there is '", peer.node.node_id,
                     "' (a stale record of a restarted daemon?): retry once the directory "
                     "catches up"));
  }
  return peer;
}

absl::Status PeerManager::Reconnect(const Peer& peer, absl::Time deadline) {
  const absl::Status why = peer.link()->status();
  // A restarted peer may serve at another address: the directory knows it.
  std::string address = peer.node().address;
  if (NodeDirectory* directory = node_directory_.load(std::memory_order_acquire)) {
    absl::StatusOr<std::string> now = directory->AddressOf(peer.node_id(), deadline);
    if (now.ok()) address = *now;
  }
  absl::StatusOr<PeerInfo> again = ConnectNow(address, deadline);
  if (!again.ok()) {
    return absl::UnavailableError(absl::StrCat("peer '", peer.node_id(), "' is disconnected (",
                                               why.message(), ") and connecting it again failed: ",
                                               again.status().message()));
  }
  spdlog::info("peer {} reconnected after: {}", peer.node_id(), why.message());
  return absl::OkStatus();
}

void PeerManager::InstallSelf(NodeIdentity self, std::shared_ptr<transport::Link> link) {
  XFERD_CHECK(!life_.ready() && self_ == nullptr);
  self_ = Peer::Self(std::move(self), std::move(link), transport_.kind());
}

absl::Status PeerManager::Resolve(Peer& peer, const std::string& name, absl::string_view role,
                                  absl::Time deadline) {
  absl::StatusOr<ResolvedRegion> region =
      rpc_.ResolveRegion(peer.node().address, life_.self(), peer.peer_link_id(), name, deadline);
  if (!region.ok()) {
    return Prefixed(region.status(),
                    absl::StrCat(role, " region '", name, "' on peer '", peer.node_id(), "': "));
  }
  if (absl::Status s = transport_.CheckRemoteRegion(region->key, *peer.link()); !s.ok()) {
    return Prefixed(s, absl::StrCat("peer '", peer.node_id(), "': "));
  }
  peer.CacheRegion(name, *region);
  return absl::OkStatus();
}

absl::StatusOr<PeerInfo> PeerManager::ConnectNow(const std::string& address, absl::Time deadline) {
  if (life_.draining()) return absl::UnavailableError("daemon is shutting down");
  if (!life_.ready()) return absl::UnavailableError("daemon is starting up: retry");
  if (address.empty()) return absl::InvalidArgumentError("peer address is empty: give host:port");
  // One handshake per address at a time: concurrent writers to a broken
  // peer share one reconnection instead of replacing each other's links.
  {
    MutexLock lock(&mu_);
    auto free = [this, &address]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !connecting_.contains(address) && !saying_goodbye_.contains(address);
    };
    if (!mu_.AwaitWithDeadline(free, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("another connection to ", address, " is still in progress"));
    }
    if (std::shared_ptr<Peer> existing = peers_.Find(address);
        existing != nullptr && !existing->link()->broken()) {
      return existing->Info();
    }
    connecting_.insert(address);
  }
  absl::Cleanup done_connecting = [this, &address] {
    MutexLock lock(&mu_);
    connecting_.erase(address);
  };
  const NodeIdentity& self = life_.self();
  HandshakeMessage request{self, {}, NewLinkId()};
  ASSIGN_OR_RETURN(std::shared_ptr<transport::Link> link,
                   transport_.CreateLink(&request.endpoints));
  absl::StatusOr<HandshakeMessage> reply = rpc_.Handshake(address, request, deadline);
  absl::Status status = reply.status();
  if (status.ok() && reply->node.node_id == self.node_id) {
    status = absl::FailedPreconditionError(
        absl::StrCat(address, " is this daemon itself (node '", self.node_id, "')"));
  }
  if (status.ok()) {
    // Keep the address that worked for us rather than the one it advertises.
    reply->node.address = address;
    // A peer whose data lanes listen on a wildcard without
    // transport.tcp_advertise_host names no data host: its lanes are at the
    // host its gRPC service answered on.
    if (reply->endpoints.kind == transport::TransportKind::kTcp &&
        reply->endpoints.tcp.host.empty()) {
      if (absl::StatusOr<HostPort> grpc = ParseHostPort(address); grpc.ok()) {
        reply->endpoints.tcp.host = grpc->host;
      }
    }
    status = transport_.CheckEndpoints(reply->endpoints);
  }
  if (status.ok()) {
    status = link->Connect(transport::PeerIdentity{reply->node.node_id, reply->node.incarnation},
                           reply->endpoints, deadline);
  }
  if (!status.ok()) {
    link->Close(status);
    return Prefixed(status, absl::StrCat("connecting to peer at ", address, ": "));
  }
  std::shared_ptr<Peer> peer = Install(reply->node, /*outbound=*/true, std::move(link),
                                       request.link_id, reply->link_id);
  return peer->Info();
}

absl::Status PeerManager::ExplainRefusal(const Peer& peer, const absl::Status& refused) {
  const NodeIdentity& node = peer.node();
  const absl::StatusOr<uint64_t> answer =
      rpc_.Ping(node.address, life_.self(), absl::Now() + kNotifyTimeout);
  std::string gone;
  if (answer.ok() && *answer != node.incarnation) {
    gone = absl::StrCat("it restarted (another process answers at ", node.address, ")");
  } else if (!answer.ok() && (answer.status().code() == absl::StatusCode::kUnavailable ||
                              answer.status().code() == absl::StatusCode::kDeadlineExceeded)) {
    gone = absl::StrCat("it no longer answers at ", node.address, " (",
                        answer.status().message(), ")");
  }
  if (gone.empty()) return absl::Status(refused.code(), refused.message());  // the same process
  const std::string nic(refused.GetPayload(transport::kAccessRefused).value_or(absl::Cord()));
  return absl::UnavailableError(absl::StrCat(
      "peer ", node.node_id, " died or reset during the transfer: ", gone,
      "; its NIC refused our RDMA access (", nic, ") as the process went; the link is reset"));
}

std::shared_ptr<Peer> PeerManager::Install(NodeIdentity node, bool outbound,
                                           std::shared_ptr<transport::Link> link,
                                           uint64_t link_id, uint64_t peer_link_id) {
  auto peer = std::make_shared<Peer>(std::move(node), outbound, std::move(link), transport_.kind(),
                                     transport_.device(), link_id, peer_link_id);
  spdlog::info("peer connected node={} address={} transport={} lanes={} {}", peer->node_id(),
               peer->node().address, transport::TransportKindName(transport_.kind()),
               peer->link()->lane_count(), outbound ? "outbound" : "inbound");
  MutexLock lock(&mu_);
  if (std::shared_ptr<Peer> replaced = peers_.Install(peer)) RetireCountersLocked(*replaced);
  return peer;
}

absl::StatusOr<HandshakeMessage> PeerManager::AcceptHandshake(const HandshakeMessage& request) {
  if (life_.draining()) return absl::UnavailableError("daemon is shutting down");
  if (!life_.ready()) return absl::UnavailableError("daemon is starting up: retry");
  const NodeIdentity& self = life_.self();
  if (request.node.node_id.empty()) {
    return absl::InvalidArgumentError("handshake without a node id");
  }
  if (request.node.node_id == self.node_id && request.node.incarnation == self.incarnation) {
    return absl::FailedPreconditionError(
        absl::StrCat("a daemon cannot connect to itself (node '", self.node_id, "')"));
  }
  if (request.node.node_id == self.node_id) {
    return absl::FailedPreconditionError(absl::StrCat("peer claims this daemon's own node id '",
                                                      self.node_id,
                                                      "': give every daemon a unique node_id"));
  }
  RETURN_IF_ERROR(transport_.CheckEndpoints(request.endpoints));
  HandshakeMessage reply{self, {}, NewLinkId()};
  ASSIGN_OR_RETURN(
      std::shared_ptr<transport::Link> link,
      transport_.AcceptLink(transport::PeerIdentity{request.node.node_id, request.node.incarnation},
                            request.endpoints, &reply.endpoints));
  Install(request.node, /*outbound=*/false, std::move(link), reply.link_id, request.link_id);
  return reply;
}

void PeerManager::RetireCountersLocked(const Peer& peer) {
  const transport::LinkCounters& c = peer.link()->counters();
  PeerTraffic& closed = closed_traffic_[peer.node_id()];
  closed.bytes_sent += c.bytes_sent.load(std::memory_order_relaxed);
  closed.bytes_received += c.bytes_received.load(std::memory_order_relaxed);
  closed.rejected_writes += c.writes_rejected.load(std::memory_order_relaxed);
}

absl::StatusOr<std::shared_ptr<Peer>> PeerManager::Remove(const std::string& node_or_address) {
  MutexLock lock(&mu_);
  std::shared_ptr<Peer> peer = peers_.Remove(node_or_address);
  if (peer == nullptr) return absl::NotFoundError(absl::StrCat("no peer '", node_or_address, "'"));
  RetireCountersLocked(*peer);
  ++saying_goodbye_[peer->node().address];
  return peer;
}

void PeerManager::FarewellAndClose(std::shared_ptr<Peer> peer) {
  executor_.Run([this, peer = std::move(peer)] {
    const std::string& address = peer->node().address;
    (void)rpc_.Goodbye(address, life_.self(), "disconnected by its peer",
                       absl::Now() + kNotifyTimeout);
    peer->link()->Close(absl::UnavailableError("disconnected on request"));
    MutexLock lock(&mu_);
    if (--saying_goodbye_[address] == 0) saying_goodbye_.erase(address);
  });
}

void PeerManager::SayGoodbye(const std::string& reason, absl::Time deadline) {
  for (const std::shared_ptr<Peer>& peer : peers_.List()) {
    if (peer->link()->broken()) continue;
    absl::Status s = rpc_.Goodbye(peer->node().address, life_.self(), reason,
                                  std::min(deadline, absl::Now() + kNotifyTimeout));
    if (!s.ok()) spdlog::debug("goodbye to {} failed: {}", peer->node_id(), s);
  }
}

void PeerManager::NotifyInvalidated(uint32_t region_id, const std::string& name,
                                    std::function<void()> then) {
  std::vector<std::shared_ptr<Peer>> resolvers;
  {
    MutexLock lock(&mu_);
    if (auto it = resolved_by_.find(region_id); it != resolved_by_.end()) {
      for (const std::string& node : it->second) {
        if (std::shared_ptr<Peer> peer = peers_.Find(node)) resolvers.push_back(std::move(peer));
      }
      resolved_by_.erase(it);
    }
  }
  TellInvalidated(std::move(resolvers), region_id, name, std::move(then));
}

void PeerManager::TellInvalidated(std::vector<std::shared_ptr<Peer>> peers, uint32_t region_id,
                                  std::string name, std::function<void()> then) {
  if (peers.empty()) {
    then();
    return;
  }
  executor_.Run([this, peers = std::move(peers), region_id, name = std::move(name),
                 then = std::move(then)] {
    for (const std::shared_ptr<Peer>& peer : peers) {
      if (peer->link()->broken()) continue;
      absl::Status s = rpc_.InvalidateRegion(peer->node().address, life_.self(), region_id, name,
                                             absl::Now() + kNotifyTimeout);
      if (!s.ok()) spdlog::debug("invalidating region {} at {} failed: {}", name, peer->node_id(), s);
    }
    then();
  });
}

std::vector<std::shared_ptr<Peer>> PeerManager::TakeExcludedResolvers(
    const memory::Region& region) {
  std::vector<std::shared_ptr<Peer>> excluded;
  MutexLock lock(&mu_);
  if (auto it = resolved_by_.find(region.id()); it != resolved_by_.end()) {
    absl::erase_if(it->second, [&](const std::string& node) {
      if (region.PeerAllowed(node)) return false;
      if (std::shared_ptr<Peer> peer = peers_.Find(node)) excluded.push_back(std::move(peer));
      return true;
    });
  }
  return excluded;
}

std::shared_ptr<Peer> PeerManager::PeerFor(const std::string& node_id,
                                           uint64_t incarnation) const {
  std::shared_ptr<Peer> peer = peers_.Find(node_id);
  if (peer == nullptr || peer->node_id() != node_id || peer->node().incarnation != incarnation) {
    return nullptr;
  }
  return peer;
}

void PeerManager::AddStats(EngineStats* stats) const {
  std::vector<std::shared_ptr<Peer>> peers;
  {
    // Retired totals and the peer list together: a peer is retired and
    // removed under mu_, so each link is counted exactly once.
    MutexLock lock(&mu_);
    stats->traffic = closed_traffic_;
    peers = peers_.List();
  }
  for (const std::shared_ptr<Peer>& peer : peers) {
    const transport::LinkCounters& c = peer->link()->counters();
    PeerTraffic& traffic = stats->traffic[peer->node_id()];
    traffic.bytes_sent += c.bytes_sent.load(std::memory_order_relaxed);
    traffic.bytes_received += c.bytes_received.load(std::memory_order_relaxed);
    traffic.rejected_writes += c.writes_rejected.load(std::memory_order_relaxed);
    ++stats->peers;
    if (!peer->link()->broken()) stats->lanes += peer->link()->lane_count();
  }
  for (const auto& [node, traffic] : stats->traffic) {
    stats->bytes_sent += traffic.bytes_sent;
    stats->bytes_received += traffic.bytes_received;
    stats->rejected_writes += traffic.rejected_writes;
  }
}

}  // namespace xferd::engine
