// Engine: peers — handshakes in both directions, region resolution for
// peers, invalidation and goodbye notices, disconnects.
#include <sys/random.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/host_port.h"
#include "daemon/common/log.h"
#include "daemon/engine/engine.h"

namespace xferd::engine {
namespace {

// How long a resolution waits for the link it names to be installed: the
// callee initiated that handshake and is still finishing it.
constexpr absl::Duration kLinkInstallWait = absl::Seconds(5);

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

// NOT_FOUND unless `region` is still `name` in `regions`; PERMISSION_DENIED
// unless its ACL admits the node.
absl::Status CheckResolvable(const memory::RegionRegistry& regions, const std::string& self,
                             const std::string& node_id, const std::string& name,
                             const memory::Region* region) {
  if (region == nullptr || regions.Find(name).get() != region) {
    return absl::NotFoundError(absl::StrCat("node '", self, "' has no region named '", name, "'"));
  }
  if (!region->PeerAllowed(node_id)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node '", node_id, "' is not in the ACL of region '", name, "' on '", self, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

void Engine::ConnectPeer(const std::string& address, absl::Duration timeout,
                         Callback<PeerInfo> done) {
  const absl::Time deadline = absl::Now() + timeout;
  executor_.Run([this, address, deadline, done = std::move(done)] {
    done(ConnectNodeOrAddress(address, deadline));
  });
}

absl::StatusOr<PeerInfo> Engine::ConnectNodeOrAddress(const std::string& target,
                                                      absl::Time deadline) {
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

absl::StatusOr<PeerInfo> Engine::ConnectNodeAt(const std::string& node_id,
                                               const std::string& address, absl::Time deadline) {
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

absl::StatusOr<PeerInfo> Engine::ConnectNow(const std::string& address, absl::Time deadline) {
  if (draining()) return absl::UnavailableError("daemon is shutting down");
  if (!ready()) return absl::UnavailableError("daemon is starting up: retry");
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
  HandshakeMessage request{self_, {}, NewLinkId()};
  ASSIGN_OR_RETURN(std::shared_ptr<transport::Link> link,
                   transport_.CreateLink(&request.endpoints));
  absl::StatusOr<HandshakeMessage> reply = rpc_.Handshake(address, request, deadline);
  absl::Status status = reply.status();
  if (status.ok() && reply->node.node_id == self_.node_id) {
    status = absl::FailedPreconditionError(
        absl::StrCat(address, " is this daemon itself (node '", self_.node_id, "')"));
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
    status = link->Connect(transport::PeerIdentity{reply->node.node_id, reply->node.incarnation},
                           reply->endpoints, deadline);
  }
  if (!status.ok()) {
    link->Close(status);
    return Prefixed(status, absl::StrCat("connecting to peer at ", address, ": "));
  }
  std::shared_ptr<Peer> peer = InstallPeer(reply->node, /*outbound=*/true, std::move(link),
                                           request.link_id, reply->link_id);
  return peer->Info();
}

std::shared_ptr<Peer> Engine::InstallPeer(NodeIdentity node, bool outbound,
                                          std::shared_ptr<transport::Link> link, uint64_t link_id,
                                          uint64_t peer_link_id) {
  auto peer = std::make_shared<Peer>(std::move(node), outbound, std::move(link), transport_.kind(),
                                     transport_.device(), link_id, peer_link_id);
  spdlog::info("peer connected node={} address={} transport={} lanes={} {}", peer->node_id(),
               peer->node().address, transport::TransportKindName(transport_.kind()),
               peer->link()->lane_count(), outbound ? "outbound" : "inbound");
  MutexLock lock(&mu_);
  if (std::shared_ptr<Peer> replaced = peers_.Install(peer)) RetireCountersLocked(*replaced);
  return peer;
}

absl::StatusOr<HandshakeMessage> Engine::AcceptHandshake(const HandshakeMessage& request) {
  if (draining()) return absl::UnavailableError("daemon is shutting down");
  if (!ready()) return absl::UnavailableError("daemon is starting up: retry");
  if (request.node.node_id.empty()) {
    return absl::InvalidArgumentError("handshake without a node id");
  }
  if (request.node.node_id == self_.node_id && request.node.incarnation == self_.incarnation) {
    return absl::FailedPreconditionError(
        absl::StrCat("a daemon cannot connect to itself (node '", self_.node_id, "')"));
  }
  if (request.node.node_id == self_.node_id) {
    return absl::FailedPreconditionError(absl::StrCat("peer claims this daemon's own node id '",
                                                      self_.node_id,
                                                      "': give every daemon a unique node_id"));
  }
  HandshakeMessage reply{self_, {}, NewLinkId()};
  ASSIGN_OR_RETURN(
      std::shared_ptr<transport::Link> link,
      transport_.AcceptLink(transport::PeerIdentity{request.node.node_id, request.node.incarnation},
                            request.endpoints, &reply.endpoints));
  InstallPeer(request.node, /*outbound=*/false, std::move(link), reply.link_id, request.link_id);
  return reply;
}

void Engine::RetireCountersLocked(const Peer& peer) {
  const transport::LinkCounters& c = peer.link()->counters();
  PeerTraffic& closed = closed_traffic_[peer.node_id()];
  closed.bytes_sent += c.bytes_sent.load(std::memory_order_relaxed);
  closed.bytes_received += c.bytes_received.load(std::memory_order_relaxed);
  closed.rejected_writes += c.writes_rejected.load(std::memory_order_relaxed);
}

std::shared_ptr<Peer> Engine::PeerFor(const std::string& node_id, uint64_t incarnation) const {
  std::shared_ptr<Peer> peer = peers_.Find(node_id);
  if (peer == nullptr || peer->node_id() != node_id || peer->node().incarnation != incarnation) {
    return nullptr;
  }
  return peer;
}

absl::StatusOr<std::shared_ptr<Peer>> Engine::PeerForLink(const std::string& node_id,
                                                          uint64_t incarnation, uint64_t link_id,
                                                          absl::Time deadline) {
  std::shared_ptr<Peer> peer;
  auto found = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    peer = PeerFor(node_id, incarnation);
    // A link this daemon is still connecting (it initiated the handshake,
    // the peer already installed its side) is installed soon: wait for it.
    const bool matches = peer != nullptr && (link_id == 0 || peer->link_id() == link_id);
    return matches || connecting_.empty();
  };
  {
    MutexLock lock(&mu_);
    mu_.AwaitWithDeadline(found, std::min(deadline, absl::Now() + kLinkInstallWait));
  }
  if (peer == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node '", node_id, "' has no link with this daemon (restarted?): handshake first"));
  }
  if (link_id != 0 && peer->link_id() != link_id) {
    return absl::UnavailableError(absl::StrCat(
        "the link node '", node_id, "' asks keys for is not this daemon's current link with it ("
        "replaced by a reconnection): retry"));
  }
  return peer;
}

void Engine::ServeResolve(const std::string& node_id, uint64_t incarnation, uint64_t link_id,
                          const std::string& name, absl::Time deadline,
                          Callback<ResolvedRegion> done) {
  executor_.Run([this, node_id, incarnation, link_id, name, deadline, done = std::move(done)] {
    done(ResolveForPeer(node_id, incarnation, link_id, name, deadline));
  });
}

absl::StatusOr<ResolvedRegion> Engine::ResolveForPeer(const std::string& node_id,
                                                      uint64_t incarnation, uint64_t link_id,
                                                      const std::string& name,
                                                      absl::Time deadline) {
  ASSIGN_OR_RETURN(std::shared_ptr<Peer> peer,
                   PeerForLink(node_id, incarnation, link_id, deadline));
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  const auto resolvable = [&] {
    return CheckResolvable(regions_, self_.node_id, node_id, name, region.get());
  };
  RETURN_IF_ERROR(resolvable());
  {
    MutexLock lock(&mu_);
    resolved_by_[region->id()].insert(node_id);
  }
  ASSIGN_OR_RETURN(transport::RemoteRegion key,
                   transport_.GrantRegion(*peer->link(), *region, deadline));
  // A deregistration or an ACL change while the keys were being bound
  // revoked what was granted then (resolved_by_ named this node already):
  // these too.
  if (absl::Status s = resolvable(); !s.ok()) {
    transport_.RevokeRegion(*region, peer->link().get());
    return s;
  }
  return ResolvedRegion{std::move(key), region->access(), region->spec().landed_ranges};
}

void Engine::NotifyInvalidated(uint32_t region_id, const std::string& name,
                               std::function<void()> then) {
  absl::flat_hash_set<std::string> nodes;
  {
    MutexLock lock(&mu_);
    auto it = resolved_by_.find(region_id);
    if (it != resolved_by_.end()) {
      nodes = std::move(it->second);
      resolved_by_.erase(it);
    }
  }
  if (nodes.empty()) {
    then();
    return;
  }
  executor_.Run([this, nodes = std::move(nodes), region_id, name, then = std::move(then)] {
    for (const std::string& node : nodes) {
      std::shared_ptr<Peer> peer = peers_.Find(node);
      if (peer == nullptr || peer->link()->broken()) continue;
      absl::Status s = rpc_.InvalidateRegion(peer->node().address, self_, region_id, name,
                                             absl::Now() + absl::Seconds(2));
      if (!s.ok()) spdlog::debug("invalidating region {} at {} failed: {}", name, node, s);
    }
    then();
  });
}

absl::Status Engine::OnRegionInvalidated(const std::string& node_id, uint64_t incarnation,
                                         uint32_t region_id, const std::string& region) {
  if (std::shared_ptr<Peer> peer = PeerFor(node_id, incarnation)) {
    peer->ForgetRegion(region);
    peer->ForgetRegionId(region_id);
  }
  return absl::OkStatus();
}

absl::Status Engine::OnGoodbye(const std::string& node_id, uint64_t incarnation,
                               const std::string& reason) {
  if (std::shared_ptr<Peer> peer = PeerFor(node_id, incarnation)) {
    spdlog::info("peer {} says goodbye: {}", node_id, reason);
    peer->link()->Close(
        absl::UnavailableError(absl::StrCat("peer '", node_id, "' went away: ", reason)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> Engine::DisconnectPeer(const std::string& node_or_address) {
  std::shared_ptr<Peer> peer;
  {
    MutexLock lock(&mu_);
    peer = peers_.Remove(node_or_address);
    if (peer != nullptr) {
      RetireCountersLocked(*peer);
      ++saying_goodbye_[peer->node().address];
    }
  }
  if (peer == nullptr) {
    return absl::NotFoundError(absl::StrCat("no peer '", node_or_address, "'"));
  }
  const absl::Status reason = absl::UnavailableError(
      absl::StrCat("peer '", peer->node_id(), "' was disconnected on request"));
  const uint32_t failed =
      CancelWhere([&](const Transfer& t) { return t.plan().peer == peer; }, reason);
  executor_.Run([this, peer] {
    const std::string& address = peer->node().address;
    (void)rpc_.Goodbye(address, self_, "disconnected by its peer", absl::Now() + absl::Seconds(2));
    peer->link()->Close(absl::UnavailableError("disconnected on request"));
    MutexLock lock(&mu_);
    if (--saying_goodbye_[address] == 0) saying_goodbye_.erase(address);
  });
  spdlog::info("peer disconnected node={} failed_transfers={}", peer->node_id(), failed);
  return failed;
}

std::vector<PeerInfo> Engine::ListPeers() const {
  std::vector<PeerInfo> out;
  for (const std::shared_ptr<Peer>& peer : peers_.List()) out.push_back(peer->Info());
  return out;
}

}  // namespace xferd::engine
