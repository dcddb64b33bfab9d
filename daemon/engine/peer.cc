#include "daemon/engine/peer.h"

#include <algorithm>

namespace xferd::engine {

Peer::Peer(NodeIdentity node, bool outbound, std::shared_ptr<transport::Link> link,
           transport::TransportKind transport, std::string device, uint64_t link_id,
           uint64_t peer_link_id)
    : node_(std::move(node)),
      outbound_(outbound),
      link_(std::move(link)),
      transport_(transport),
      device_(std::move(device)),
      link_id_(link_id),
      peer_link_id_(peer_link_id),
      connected_at_(absl::Now()) {}

std::shared_ptr<Peer> Peer::Self(NodeIdentity node, std::shared_ptr<transport::Link> link,
                                 transport::TransportKind transport) {
  auto peer = std::make_shared<Peer>(std::move(node), /*outbound=*/false, std::move(link),
                                     transport, "", /*link_id=*/0, /*peer_link_id=*/0);
  peer->self_ = true;
  return peer;
}

PeerState Peer::state() const {
  if (link_->broken()) return PeerState::kBroken;
  return link_->ready() ? PeerState::kConnected : PeerState::kConnecting;
}

PeerInfo Peer::Info() const {
  PeerInfo info;
  info.node = node_;
  info.transport = transport_;
  info.state = state();
  info.lanes = link_->lane_count();
  info.outbound = outbound_;
  info.last_error = link_->status();
  info.connected_at = connected_at_;
  info.bytes_sent = link_->counters().bytes_sent.load(std::memory_order_relaxed);
  info.bytes_received = link_->counters().bytes_received.load(std::memory_order_relaxed);
  info.device = device_;
  return info;
}

std::shared_ptr<const CachedKey> Peer::CachedKeyFor(const std::string& name) const {
  MutexLock lock(&mu_);
  auto it = regions_.find(name);
  if (it == regions_.end()) return nullptr;
  if (it->second->gone.load(std::memory_order_acquire)) {
    regions_.erase(it);
    return nullptr;
  }
  return it->second;
}

std::optional<ResolvedRegion> Peer::CachedRegion(const std::string& name) const {
  std::shared_ptr<const CachedKey> key = CachedKeyFor(name);
  if (key == nullptr) return std::nullopt;
  return key->region;
}

void Peer::CacheRegion(const std::string& name, const ResolvedRegion& region) {
  MutexLock lock(&mu_);
  regions_[name] = std::make_shared<const CachedKey>(region);
}

void Peer::ForgetRegion(const std::string& name) {
  MutexLock lock(&mu_);
  regions_.erase(name);
}

void Peer::ForgetRegionId(uint32_t region_id) {
  MutexLock lock(&mu_);
  absl::erase_if(regions_,
                 [&](const auto& entry) { return entry.second->region.key.region_id == region_id; });
}

void Peer::ForgetRegions() {
  MutexLock lock(&mu_);
  regions_.clear();
}

std::shared_ptr<Peer> PeerDirectory::Install(std::shared_ptr<Peer> peer) {
  std::shared_ptr<Peer> replaced;
  {
    MutexLock lock(&mu_);
    auto& slot = by_node_[peer->node_id()];
    replaced = std::move(slot);
    slot = std::move(peer);
  }
  if (replaced != nullptr) {
    replaced->link()->Close(absl::UnavailableError(
        "the peer connected again (restart or reconnect); this link was replaced"));
  }
  return replaced;
}

std::shared_ptr<Peer> PeerDirectory::FindLocked(const std::string& key) const {
  if (auto it = by_node_.find(key); it != by_node_.end()) return it->second;
  for (const auto& [node, peer] : by_node_) {
    if (peer->node().address == key) return peer;
  }
  return nullptr;
}

std::shared_ptr<Peer> PeerDirectory::Find(const std::string& node_or_address) const {
  ReaderMutexLock lock(&mu_);
  return FindLocked(node_or_address);
}

std::shared_ptr<Peer> PeerDirectory::Remove(const std::string& node_or_address) {
  MutexLock lock(&mu_);
  std::shared_ptr<Peer> peer = FindLocked(node_or_address);
  if (peer != nullptr) by_node_.erase(peer->node_id());
  return peer;
}

std::vector<std::shared_ptr<Peer>> PeerDirectory::List() const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Peer>> peers;
  for (const auto& [node, peer] : by_node_) peers.push_back(peer);
  std::sort(peers.begin(), peers.end(),
            [](const auto& a, const auto& b) { return a->node_id() < b->node_id(); });
  return peers;
}

std::shared_ptr<const CachedKey> RemoteKeySnapshot::Find(const Peer& peer,
                                                         const std::string& name) {
  auto [it, inserted] = keys_.try_emplace(std::make_pair(&peer, name));
  if (inserted) it->second = peer.CachedKeyFor(name);
  return it->second;
}

}  // namespace xferd::engine
