// This daemon's membership in the cluster directory on etcd ([cluster]): it
// claims its node id under a lease (refused if another live daemon holds it),
// publishes its regions' public descriptions, keeps the lease alive, comes
// back under a new lease when etcd returns after an outage, and deletes its
// keys when it leaves. Lookups are answered from a cache of the whole prefix
// kept current by an etcd watch (directory_watch.h); a miss asks etcd. The
// key layout is in records.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/cluster/directory_cache.h"
#include "daemon/cluster/directory_watch.h"
#include "daemon/cluster/etcd_client.h"
#include "daemon/common/config.h"
#include "daemon/engine/control_executor.h"
#include "daemon/engine/engine.h"
#include "xferd/v1/directory.pb.h"

namespace xferd::cluster {

// What NodeInfo reports.
struct DirectoryState {
  bool connected = false;
  std::string error;  // the last failure while not connected
  // The cache: the etcd revision it reflects, whether its watch is open,
  // and how often it was read whole again after a compaction.
  int64_t revision = 0;
  bool watching = false;
  int64_t relists = 0;
};

class Directory final : public engine::RegionObserver, public engine::NodeDirectory {
 public:
  // Claims <prefix>nodes/<self.node_id> under a new lease in one transaction
  // that succeeds only if no live daemon holds the key, publishes the
  // engine's regions, then keeps the lease alive on its own thread and
  // registers itself as the engine's region observer. Call once the engine
  // knows its identity; it is then also the engine's node directory. Errors: ALREADY_EXISTS
  // (another live daemon has this node id: the message names its address), UNAVAILABLE (etcd does
  // not answer), INVALID_ARGUMENT (a node id with '/', unreadable TLS file).
  static absl::StatusOr<std::unique_ptr<Directory>> Join(const ClusterConfig& config,
                                                         v1::DirectoryNode self,
                                                         engine::Engine& engine);
  // Stops the keep-alive thread and unregisters from the engine; keys not
  // deleted by Leave expire with the lease.
  ~Directory() override;

  // Deletes this daemon's keys and revokes its lease, within `deadline`
  // (main, on SIGTERM, before the goodbyes). Logs a failure; its keys then
  // expire with the lease.
  void Leave(absl::Time deadline);

  // Every daemon of the prefix and its regions, from the cache (any thread;
  // never waits on etcd). While etcd is out of reach it is the directory as
  // last seen: see current().
  DirectoryListing Listing() const;
  // The cache follows etcd: its watch is open and this daemon's lease holds.
  bool current() const;
  // The regions of that name, from the cache; if it has none, read from
  // etcd (the region may be a moment old) on the directory's lookup thread,
  // so gRPC threads never wait on etcd. `done` runs inline or there. An
  // empty answer: no live daemon has such a region. Errors: UNAVAILABLE
  // naming etcd (a miss while etcd is out of reach).
  using FoundRegions = absl::StatusOr<std::vector<v1::DirectoryRegion>>;
  void FindRegionAsync(std::string name, std::function<void(FoundRegions)> done) const;

  DirectoryState state() const;
  const ClusterConfig& config() const { return config_; }
  const std::string& node_id() const { return self_.node_id(); }

  // engine::RegionObserver: wakes the thread, which publishes the change.
  void OnRegionsChanged() override;
  // engine::NodeDirectory: the cached record's address; a node the cache
  // does not have (it may have joined a moment ago) is read from etcd.
  // Errors: NOT_FOUND (no live daemon of that id), UNAVAILABLE naming etcd
  // (a node not cached while etcd is out of reach).
  absl::StatusOr<std::string> AddressOf(const std::string& node_id, absl::Time deadline) override;

 private:
  Directory(const ClusterConfig& config, v1::DirectoryNode self, engine::Engine& engine,
            std::unique_ptr<EtcdClient> etcd);

  // Grants a lease and claims the node key under it (see Join).
  absl::Status Claim();
  // Makes the published regions match the engine's (puts and deletes).
  absl::Status SyncRegions();
  // Keeps the lease alive; on its loss, claims again under a new one.
  void Run();
  void SetState(const absl::Status& status);

  const ClusterConfig config_;
  // Its lease field is filled by Claim.
  v1::DirectoryNode self_;
  engine::Engine& engine_;
  const std::unique_ptr<EtcdClient> etcd_;
  // Lookups for the service; mutable: a const List may be queued.
  mutable engine::ControlExecutor lookups_{1};
  // Fed by watch_, which also marks peers whose record goes away gone in
  // the engine. Declared before it: the watch writes into it.
  DirectoryCache cache_;
  std::unique_ptr<DirectoryWatch> watch_;

  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool regions_dirty_ ABSL_GUARDED_BY(mu_) = true;
  DirectoryState state_ ABSL_GUARDED_BY(mu_);
  // Lease and published regions are the thread's alone once it runs (and
  // Join's before); Leave reads them after stopping it.
  int64_t lease_ = 0;
  std::map<std::string, std::string> published_;  // region name -> encoded record
  std::thread thread_;
};

}  // namespace xferd::cluster
