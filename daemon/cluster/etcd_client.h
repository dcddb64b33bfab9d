// A synchronous client of etcd's v3 gRPC API (KV, Lease), on the stubs
// generated from etcd's own protos (//third_party/etcd). It knows the
// endpoints of cluster.etcd and moves to the next one when one does not
// answer, so losing one member of an etcd cluster costs a retry, not an error.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/common/config.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace xferd::cluster {

class EtcdClient {
 public:
  // Builds one channel per endpoint (TLS with cluster.ca/cert/key, else
  // plaintext); connects lazily. Errors: INVALID_ARGUMENT naming a TLS file
  // that cannot be read.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Create(const ClusterConfig& config);

  // Each call tries the endpoints in turn, starting with the last one that
  // answered, until one answers or `timeout` has passed. Any thread.
  // Errors: UNAVAILABLE or DEADLINE_EXCEEDED naming the endpoints and the
  // last cause ("etcd at 127.0.0.1:2379 ... is etcd running?"), or etcd's
  // own status (e.g. NOT_FOUND for an unknown lease).
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request,
                                                absl::Duration timeout);
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request,
                                                    absl::Duration timeout);
  // A new lease of `ttl` (whole seconds, at least 1); returns its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl, absl::Duration timeout);
  absl::Status RevokeLease(int64_t lease, absl::Duration timeout);
  // One keep-alive of `lease`; returns the TTL etcd grants again, 0 when
  // the lease has expired (its keys are gone).
  absl::StatusOr<int64_t> KeepAlive(int64_t lease, absl::Duration timeout);

  // The Watch service of the endpoint that answered last (a stream is
  // bound to one endpoint; the caller opens it again on another after an
  // error). Any thread.
  etcdserverpb::Watch::Stub& WatchStub();

  // "127.0.0.1:2379,127.0.0.1:2381": for messages and NodeInfo.
  const std::string& endpoints() const { return endpoints_text_; }

 private:
  struct Endpoint {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  explicit EtcdClient(std::vector<Endpoint> endpoints, std::string endpoints_text);

  // Runs `call` on each endpoint in turn (see above). `call` returns the
  // gRPC status of one attempt on one endpoint, within its context.
  absl::Status Call(absl::Duration timeout, const char* what,
                    const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& call);

  std::vector<Endpoint> endpoints_;
  const std::string endpoints_text_;
  Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xferd::cluster
