// Keeps a DirectoryCache current: a full read of the prefix, then an etcd
// Watch on it from the revision after that read. When the stream fails (etcd
// restarting, a member lost) it opens again, on the next endpoint, from the
// revision after the last event the cache holds, so nothing in between is
// missed; if etcd compacted those revisions away, it reads everything again.
// Each node record that goes away (a daemon left, or its lease expired) is
// reported, so the engine can mark that peer gone at once.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "daemon/base/mutex.h"
#include "daemon/cluster/directory_cache.h"
#include "daemon/cluster/etcd_client.h"
#include "xferd/v1/directory.pb.h"

namespace xferd::cluster {

// Reads every node and region record of `prefix` in one transaction (one
// revision): responses(0) holds the nodes, responses(1) the regions.
absl::StatusOr<etcdserverpb::TxnResponse> ReadDirectory(EtcdClient& etcd, const std::string& prefix,
                                                        absl::Duration timeout);

class DirectoryWatch {
 public:
  // `on_gone` runs on the watch's thread with the removed record: quick,
  // never blocking on etcd. `etcd` and `cache` outlive the watch.
  using OnGone = std::function<void(const v1::DirectoryNode& gone)>;
  DirectoryWatch(EtcdClient& etcd, std::string prefix, DirectoryCache& cache, OnGone on_gone);
  // Stop()s.
  ~DirectoryWatch();

  // Fills the cache with a full read (Join, before any lookup), then starts
  // the watch thread. Errors: UNAVAILABLE naming etcd (the thread is not
  // started).
  absl::Status Start();

  // Cancels the stream and joins the thread; the cache stays as it is.
  // Idempotent; the accessors below still answer.
  void Stop();

  // A stream is open and etcd has confirmed it: the cache follows etcd.
  bool live() const;
  // How many full reads were made after the first (etcd had compacted
  // what the watch had not read yet).
  int64_t relists() const;

 private:
  absl::Status Load();
  void Run();
  // One stream, until it fails or the watch stops.
  void WatchOnce();

  EtcdClient& etcd_;
  const std::string prefix_;
  DirectoryCache& cache_;
  const OnGone on_gone_;
  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool live_ ABSL_GUARDED_BY(mu_) = false;
  bool reload_ ABSL_GUARDED_BY(mu_) = false;  // compacted: read everything again
  int64_t relists_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open stream's
  std::thread thread_;
};

}  // namespace xferd::cluster
