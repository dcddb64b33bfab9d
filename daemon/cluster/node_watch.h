// Watches <prefix>nodes/ in etcd and reports each node record that goes away
// (a daemon that left, or whose lease expired), so the engine can mark that
// peer gone at once instead of waiting for its lanes to time out. After an
// error the watch opens again from the revision after the last event seen,
// so no departure in between is missed (unless etcd compacted it away).
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "daemon/base/mutex.h"
#include "daemon/cluster/etcd_client.h"
#include "xferd/v1/directory.pb.h"

namespace xferd::cluster {

class NodeWatch {
 public:
  // `on_gone` runs on the watch's thread with the deleted record: quick,
  // never blocking on etcd. `etcd` outlives the watch.
  using OnGone = std::function<void(const v1::DirectoryNode& gone)>;
  NodeWatch(EtcdClient& etcd, std::string prefix, OnGone on_gone);
  // Cancels the stream and joins the thread.
  ~NodeWatch();

  // The revision the next stream starts from (0 before the first answer).
  int64_t next_revision() const;

 private:
  void Run();
  // One stream, until it fails or the watch stops.
  void WatchOnce();

  EtcdClient& etcd_;
  const std::string prefix_;
  const OnGone on_gone_;
  mutable Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;  // the open stream's
  int64_t next_revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace xferd::cluster
