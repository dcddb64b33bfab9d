#include "daemon/cluster/etcd_client.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"

namespace xferd::cluster {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* key) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key '", key, "' names ", path, ", which cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether another endpoint may answer where this one did not.
bool TryNext(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Create(const ClusterConfig& config) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!config.ca.empty()) {
    grpc::SslCredentialsOptions tls;
    ASSIGN_OR_RETURN(tls.pem_root_certs, ReadPem(config.ca, "cluster.ca"));
    ASSIGN_OR_RETURN(tls.pem_cert_chain, ReadPem(config.cert, "cluster.cert"));
    ASSIGN_OR_RETURN(tls.pem_private_key, ReadPem(config.key, "cluster.key"));
    credentials = grpc::SslCredentials(tls);
  }
  std::vector<Endpoint> endpoints;
  for (const std::string& address : config.etcd) {
    Endpoint e;
    e.address = address;
    grpc::ChannelArguments args;
    // A dead member must not hold a call for gRPC's default backoff (up to
    // 2 min): reconnect attempts stay short, so the next call tries again.
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    // The watch stream may carry nothing for hours: HTTP/2 pings while it is
    // open tell a member that vanished without a word (a partition, no RST)
    // within 15 s, so the watch reopens elsewhere instead of waiting forever.
    // 10 s respects etcd's --grpc-keepalive-min-time (5 s by default).
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    e.channel = grpc::CreateCustomChannel(address, credentials, args);
    e.kv = etcdserverpb::KV::NewStub(e.channel);
    e.lease = etcdserverpb::Lease::NewStub(e.channel);
    e.watch = etcdserverpb::Watch::NewStub(e.channel);
    endpoints.push_back(std::move(e));
  }
  std::string text = absl::StrJoin(config.etcd, ",");
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), std::move(text)));
}

EtcdClient::EtcdClient(std::vector<Endpoint> endpoints, std::string endpoints_text)
    : endpoints_(std::move(endpoints)), endpoints_text_(std::move(endpoints_text)) {}

absl::Status EtcdClient::Call(
    absl::Duration timeout, const char* what,
    const std::function<grpc::Status(Endpoint&, grpc::ClientContext&)>& call) {
  const absl::Time deadline = absl::Now() + timeout;
  size_t first;
  {
    MutexLock lock(&mu_);
    first = preferred_;
  }
  std::string causes;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    Endpoint& endpoint = endpoints_[(first + i) % endpoints_.size()];
    // Leave the endpoints still to try a share of the time left.
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + left / (endpoints_.size() - i)));
    const grpc::Status status = call(endpoint, context);
    if (status.ok()) {
      MutexLock lock(&mu_);
      preferred_ = (first + i) % endpoints_.size();
      return absl::OkStatus();
    }
    if (!TryNext(status)) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("etcd at ", endpoint.address, " refused ", what, ": ",
                                       status.error_message()));
    }
    absl::StrAppend(&causes, causes.empty() ? "" : "; ", endpoint.address, ": ",
                    status.error_message());
  }
  return absl::UnavailableError(
      absl::StrCat("etcd (cluster.etcd = ", endpoints_text_, ") did not answer ", what, " within ",
                   absl::FormatDuration(timeout), " (", causes.empty() ? "no time left" : causes,
                   "): is etcd running and reachable from this host?"));
}

etcdserverpb::Watch::Stub& EtcdClient::WatchStub() {
  MutexLock lock(&mu_);
  // Rotate, so that a watch that keeps failing on one member tries the next.
  Endpoint& endpoint = endpoints_[preferred_];
  preferred_ = (preferred_ + 1) % endpoints_.size();
  return *endpoint.watch;
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& request,
                                                          absl::Duration timeout) {
  etcdserverpb::TxnResponse response;
  RETURN_IF_ERROR(Call(timeout, "a transaction", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->Txn(&c, request, &response);
  }));
  return response;
}

absl::StatusOr<etcdserverpb::RangeResponse> EtcdClient::Range(
    const etcdserverpb::RangeRequest& request, absl::Duration timeout) {
  etcdserverpb::RangeResponse response;
  RETURN_IF_ERROR(Call(timeout, "a range read", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.kv->Range(&c, request, &response);
  }));
  return response;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl, absl::Duration timeout) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(ttl)));
  etcdserverpb::LeaseGrantResponse response;
  RETURN_IF_ERROR(Call(timeout, "a lease grant", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.lease->LeaseGrant(&c, request, &response);
  }));
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat("etcd refused a lease: ", response.error()));
  }
  return response.id();
}

absl::Status EtcdClient::RevokeLease(int64_t lease, absl::Duration timeout) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  return Call(timeout, "a lease revocation", [&](Endpoint& e, grpc::ClientContext& c) {
    return e.lease->LeaseRevoke(&c, request, &response);
  });
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease, absl::Duration timeout) {
  // LeaseKeepAlive is a stream; one request and its answer is a keep-alive.
  etcdserverpb::LeaseKeepAliveResponse response;
  RETURN_IF_ERROR(Call(timeout, "a lease keep-alive", [&](Endpoint& e, grpc::ClientContext& c) {
    auto stream = e.lease->LeaseKeepAlive(&c);
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease);
    if (stream->Write(request) && stream->Read(&response)) {
      stream->WritesDone();
      c.TryCancel();  // the stream's end is of no interest: the answer is in
      stream->Finish().ok();
      return grpc::Status::OK;
    }
    stream->WritesDone();
    grpc::Status status = stream->Finish();
    return status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "keep-alive stream closed")
                       : status;
  }));
  return response.ttl();
}

}  // namespace xferd::cluster
