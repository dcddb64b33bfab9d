// A connected peer daemon: its identity, its data-plane link and the region
// keys resolved from it. A Peer object belongs to one link: reconnecting
// makes a new Peer, so keys learnt on an old link are never used on a new one
// (over verbs they would not work there: they are bound to the old link).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

enum class PeerState { kConnecting, kConnected, kBroken };

struct PeerInfo {
  NodeIdentity node;
  transport::TransportKind transport = transport::TransportKind::kTcp;
  PeerState state = PeerState::kConnecting;
  uint32_t lanes = 0;
  bool outbound = false;
  absl::Status last_error;
  absl::Time connected_at;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  std::string device;
};

// A region key learnt from a peer, shared by the cache and the transfers
// planned with it.
struct CachedKey {
  explicit CachedKey(ResolvedRegion r, std::shared_ptr<memory::Region> own = nullptr)
      : region(std::move(r)), own_region(std::move(own)) {}
  const ResolvedRegion region;
  // The self peer's keys only: the region itself, held while transfers
  // planned with this key copy into or out of it.
  const std::shared_ptr<memory::Region> own_region;
  // Set when the peer is found not to know the region any more (a transfer
  // refused NOT_FOUND, noted on its poller without a lock); the cache then
  // forgets the key at its next lookup, so the next transfer resolves again.
  mutable std::atomic<bool> gone{false};
};

class Peer {
 public:
  // `link_id` and `peer_link_id`: the link's random ids on this side and on
  // the peer's (the handshake swaps them).
  Peer(NodeIdentity node, bool outbound, std::shared_ptr<transport::Link> link,
       transport::TransportKind transport, std::string device, uint64_t link_id,
       uint64_t peer_link_id);
  // This daemon as its own peer, over `link` (a SelfLink): transfers to its
  // node id copy region to region. Never in the directory; its keys are
  // looked up anew for every transfer (PeerManager::ResolveOwn), never cached.
  static std::shared_ptr<Peer> Self(NodeIdentity node, std::shared_ptr<transport::Link> link,
                                    transport::TransportKind transport);

  const NodeIdentity& node() const { return node_; }
  bool is_self() const { return self_; }
  const std::string& node_id() const { return node_.node_id; }
  const std::shared_ptr<transport::Link>& link() const { return link_; }
  bool outbound() const { return outbound_; }
  uint64_t link_id() const { return link_id_; }
  uint64_t peer_link_id() const { return peer_link_id_; }
  PeerState state() const;
  PeerInfo Info() const;

  // Region keys learnt through ResolveRegion, by region name. Thread-safe.
  std::optional<ResolvedRegion> CachedRegion(const std::string& name) const;
  // The same, shared (null if none).
  std::shared_ptr<const CachedKey> CachedKeyFor(const std::string& name) const;
  void CacheRegion(const std::string& name, const ResolvedRegion& region);
  void ForgetRegion(const std::string& name);
  void ForgetRegionId(uint32_t region_id);
  // All of them: keys bound to queue pairs a rejoin replaced.
  void ForgetRegions();

 private:
  const NodeIdentity node_;
  const bool outbound_;
  const std::shared_ptr<transport::Link> link_;
  const transport::TransportKind transport_;
  const std::string device_;
  const uint64_t link_id_;
  const uint64_t peer_link_id_;
  bool self_ = false;  // set by Self() only
  const absl::Time connected_at_;

  mutable Mutex mu_;
  // Entries marked gone are dropped by the lookup that meets them.
  mutable absl::flat_hash_map<std::string, std::shared_ptr<const CachedKey>> regions_
      ABSL_GUARDED_BY(mu_);
};

// Peers by node id; lookups also accept the peer's address. Thread-safe.
class PeerDirectory {
 public:
  // Adds or replaces the peer with this node id; a replaced peer's link is
  // closed (its transfers fail). Returns the replaced peer, if any.
  std::shared_ptr<Peer> Install(std::shared_ptr<Peer> peer);
  // By node id, else by address. Null if unknown.
  std::shared_ptr<Peer> Find(const std::string& node_or_address) const;
  std::shared_ptr<Peer> Remove(const std::string& node_or_address);
  std::vector<std::shared_ptr<Peer>> List() const;

 private:
  std::shared_ptr<Peer> FindLocked(const std::string& key) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Peer>> by_node_ ABSL_GUARDED_BY(mu_);
};

// The remote keys one admission plans with, each looked up in its peer's
// cache once. A key invalidated while a long batch is planned is then used
// as if the batch had been admitted just before (the same race as an
// invalidation right after admission), instead of sending the whole batch
// back to resolve: a peer that re-registers often could do that forever.
class RemoteKeySnapshot {
 public:
  // Null if the peer has no key for the region.
  std::shared_ptr<const CachedKey> Find(const Peer& peer, const std::string& name);

 private:
  absl::flat_hash_map<std::pair<const Peer*, std::string>, std::shared_ptr<const CachedKey>> keys_;
};

}  // namespace xferd::engine
