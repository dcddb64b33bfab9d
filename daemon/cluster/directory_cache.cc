#include "daemon/cluster/directory_cache.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "daemon/cluster/records.h"
#include "daemon/common/log.h"

namespace xferd::cluster {

DirectoryCache::DirectoryCache(std::string prefix)
    : nodes_prefix_(NodesPrefix(prefix)), regions_prefix_(RegionsPrefix(prefix)) {}

std::vector<v1::DirectoryNode> DirectoryCache::Reset(const KeyValues& nodes,
                                                     const KeyValues& regions, int64_t revision) {
  MutexLock lock(&mu_);
  std::map<std::string, v1::DirectoryNode> before = std::move(nodes_);
  nodes_.clear();
  regions_.clear();
  for (const mvccpb::KeyValue& kv : nodes) PutLocked(kv);
  for (const mvccpb::KeyValue& kv : regions) PutLocked(kv);
  revision_ = revision;
  std::vector<v1::DirectoryNode> gone;
  for (auto& [id, node] : before) {
    if (!nodes_.count(id)) gone.push_back(std::move(node));
  }
  return gone;
}

void DirectoryCache::PutLocked(const mvccpb::KeyValue& kv) {
  if (absl::StartsWith(kv.key(), nodes_prefix_)) {
    absl::StatusOr<v1::DirectoryNode> node = DecodeNode(kv.key(), kv.value());
    if (node.ok()) {
      std::string id = node->node_id();
      nodes_[id] = *std::move(node);
      return;
    }
    spdlog::warn("cluster directory: skipping {}", node.status().message());
  } else if (absl::StartsWith(kv.key(), regions_prefix_)) {
    absl::StatusOr<v1::DirectoryRegion> region = DecodeRegion(kv.key(), kv.value());
    if (region.ok()) {
      regions_[region->node_id()][region->name()] = *std::move(region);
      return;
    }
    spdlog::warn("cluster directory: skipping {}", region.status().message());
  }
}

std::optional<v1::DirectoryNode> DirectoryCache::Apply(const mvccpb::Event& event) {
  const std::string& key = event.kv().key();
  MutexLock lock(&mu_);
  revision_ = std::max(revision_, event.kv().mod_revision());
  if (event.type() == mvccpb::Event::PUT) {
    PutLocked(event.kv());
    return std::nullopt;
  }
  // A delete carries only the key: <nodes>/<id> or <regions>/<id>/<name>.
  if (absl::StartsWith(key, nodes_prefix_)) {
    auto it = nodes_.find(key.substr(nodes_prefix_.size()));
    if (it == nodes_.end()) return std::nullopt;
    v1::DirectoryNode gone = std::move(it->second);
    nodes_.erase(it);
    return gone;
  }
  if (absl::StartsWith(key, regions_prefix_)) {
    const std::string rest = key.substr(regions_prefix_.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) return std::nullopt;
    auto node = regions_.find(rest.substr(0, slash));
    if (node == regions_.end()) return std::nullopt;
    node->second.erase(rest.substr(slash + 1));
    if (node->second.empty()) regions_.erase(node);
  }
  return std::nullopt;
}

std::optional<v1::DirectoryNode> DirectoryCache::Node(const std::string& node_id) const {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::vector<v1::DirectoryRegion> DirectoryCache::FindRegion(const std::string& name) const {
  std::vector<v1::DirectoryRegion> found;
  MutexLock lock(&mu_);
  for (const auto& [id, regions] : regions_) {
    auto it = regions.find(name);
    // Only regions of a node the cache holds (a region key may be seen
    // before its node's, or after it left, in the same batch of events).
    if (it != regions.end() && nodes_.count(id)) found.push_back(it->second);
  }
  return found;
}

DirectoryListing DirectoryCache::Listing() const {
  DirectoryListing listing;
  MutexLock lock(&mu_);
  listing.revision = revision_;
  listing.nodes.reserve(nodes_.size());
  for (const auto& [id, node] : nodes_) {
    DirectoryEntry& entry = listing.nodes.emplace_back();
    entry.node = node;
    auto regions = regions_.find(id);
    if (regions == regions_.end()) continue;
    for (const auto& [name, region] : regions->second) entry.regions.push_back(region);
  }
  return listing;
}

int64_t DirectoryCache::revision() const {
  MutexLock lock(&mu_);
  return revision_;
}

}  // namespace xferd::cluster
