// This daemon's copy of the cluster directory: every node and region record
// of its prefix, as of one etcd revision. DirectoryWatch fills it with a full
// read and keeps it current from an etcd watch; lookups read it, so known
// peers and regions still resolve while etcd is out of reach.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/base/mutex.h"
#include "etcd/etcdserver/etcdserverpb/rpc.pb.h"
#include "xferd/v1/directory.pb.h"

namespace xferd::cluster {

// One live daemon as the directory holds it.
struct DirectoryEntry {
  v1::DirectoryNode node;
  std::vector<v1::DirectoryRegion> regions;  // by name
};

struct DirectoryListing {
  std::vector<DirectoryEntry> nodes;  // by node id
  int64_t revision = 0;               // the etcd revision it reflects
};

using KeyValues = google::protobuf::RepeatedPtrField<mvccpb::KeyValue>;

// Thread-safe: one writer (the watch), any number of readers.
class DirectoryCache {
 public:
  explicit DirectoryCache(std::string prefix);

  // Replaces everything with a full read of nodes/ and regions/ taken at
  // `revision`. Returns the node records held before and absent now: daemons
  // that left while no watch could see it (after a compaction).
  std::vector<v1::DirectoryNode> Reset(const KeyValues& nodes, const KeyValues& regions,
                                       int64_t revision);
  // Applies one watch event (at most one revision behind the next). Returns
  // the record of a node a delete removed. Keys that are not records (someone
  // else's under the prefix) are logged and skipped.
  std::optional<v1::DirectoryNode> Apply(const mvccpb::Event& event);

  std::optional<v1::DirectoryNode> Node(const std::string& node_id) const;
  // Every region of that name, over all nodes (by node id).
  std::vector<v1::DirectoryRegion> FindRegion(const std::string& name) const;
  DirectoryListing Listing() const;
  // The last revision it reflects; 0 before the first Reset.
  int64_t revision() const;

 private:
  void PutLocked(const mvccpb::KeyValue& kv) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string nodes_prefix_;
  const std::string regions_prefix_;
  mutable Mutex mu_;
  std::map<std::string, v1::DirectoryNode> nodes_ ABSL_GUARDED_BY(mu_);
  // node id -> region name -> record. A region may arrive before its node
  // (both keys are written by one daemon, but in separate transactions).
  std::map<std::string, std::map<std::string, v1::DirectoryRegion>> regions_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xferd::cluster
