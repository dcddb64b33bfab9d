#include "daemon/service/peer_client.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/service/peer_convert.h"
#include "daemon/service/status_convert.h"

namespace xferd::service {
namespace {

// The calling daemon, as every request after the handshake names it.
template <typename Request>
Request From(const engine::NodeIdentity& self) {
  Request request;
  request.set_node_id(self.node_id);
  request.set_incarnation(self.incarnation);
  return request;
}

}  // namespace

GrpcPeerRpc::GrpcPeerRpc(std::shared_ptr<grpc::ChannelCredentials> credentials, PeerAuth auth)
    : credentials_(std::move(credentials)), auth_(auth) {}

absl::Status GrpcPeerRpc::Finish(const grpc::Status& status, const std::string& address) const {
  absl::Status s = FromGrpc(status);
  if (s.code() != absl::StatusCode::kUnavailable || !auth_.mtls()) return s;
  // A failed TLS handshake reaches the caller as UNAVAILABLE with a terse
  // reason (or just a closed socket); say what both sides need.
  return absl::UnavailableError(absl::StrCat(
      s.message(), " (if the TLS handshake failed: the daemon at ", address,
      " must present a certificate from this daemon's tls.ca naming the host of that address in "
      "its subjectAltNames (DNS or IP), and accept this daemon's certificate: both from the same "
      "CA)"));
}

std::shared_ptr<GrpcPeerRpc::Stub> GrpcPeerRpc::StubFor(const std::string& address) {
  MutexLock lock(&mu_);
  std::shared_ptr<Stub>& stub = stubs_[address];
  if (stub == nullptr) {
    grpc::ChannelArguments args;
    // Connections of its own: through gRPC's global subchannel pool, a
    // channel made after Forget would share the stalled connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub = v1::PeerService::NewStub(grpc::CreateCustomChannel(address, credentials_, args));
  }
  return stub;
}

void GrpcPeerRpc::Forget(const std::string& address, const std::shared_ptr<Stub>& stub) {
  MutexLock lock(&mu_);
  // Unless another call has already replaced it with a new one.
  if (auto it = stubs_.find(address); it != stubs_.end() && it->second == stub) stubs_.erase(it);
}

absl::StatusOr<engine::HandshakeMessage> GrpcPeerRpc::Handshake(
    const std::string& address, const engine::HandshakeMessage& request, absl::Time deadline) {
  v1::HandshakeRequest req;
  req.set_version(v1::PROTOCOL_VERSION_1);
  ToProto(request.node, req.mutable_caller());
  ToProto(request.endpoints, req.mutable_endpoints());
  req.set_link_id(request.link_id);
  v1::HandshakeResponse resp;
  grpc::ClientContext context;
  RETURN_IF_ERROR(Call(address, deadline, &v1::PeerService::Stub::Handshake, req, &resp, &context));
  if (resp.version() != v1::PROTOCOL_VERSION_1) {
    return absl::FailedPreconditionError(
        absl::StrCat("peer at ", address, " speaks protocol version ", resp.version()));
  }
  RETURN_IF_ERROR(auth_.CheckCallee(context, address, resp.callee().node_id()));
  ASSIGN_OR_RETURN(engine::HandshakeMessage reply, FromProto(resp.callee(), resp.endpoints()));
  reply.link_id = resp.link_id();
  return reply;
}

absl::StatusOr<engine::ResolvedRegion> GrpcPeerRpc::ResolveRegion(const std::string& address,
                                                                  const engine::NodeIdentity& self,
                                                                  uint64_t link_id,
                                                                  const std::string& region,
                                                                  absl::Time deadline) {
  auto req = From<v1::ResolveRegionRequest>(self);
  req.set_region(region);
  req.set_link_id(link_id);
  v1::ResolveRegionResponse resp;
  RETURN_IF_ERROR(Call(address, deadline, &v1::PeerService::Stub::ResolveRegion, req, &resp));
  return FromProto(resp);
}

absl::Status GrpcPeerRpc::InvalidateRegion(const std::string& address,
                                           const engine::NodeIdentity& self, uint32_t region_id,
                                           const std::string& region, absl::Time deadline) {
  auto req = From<v1::InvalidateRegionRequest>(self);
  req.set_region_id(region_id);
  req.set_region(region);
  v1::InvalidateRegionResponse resp;
  return Call(address, deadline, &v1::PeerService::Stub::InvalidateRegion, req, &resp);
}

absl::Status GrpcPeerRpc::Goodbye(const std::string& address, const engine::NodeIdentity& self,
                                  const std::string& reason, absl::Time deadline) {
  auto req = From<v1::GoodbyeRequest>(self);
  req.set_reason(reason);
  v1::GoodbyeResponse resp;
  return Call(address, deadline, &v1::PeerService::Stub::Goodbye, req, &resp);
}

absl::Status GrpcPeerRpc::StageRanges(const std::string& address,
                                      const engine::NodeIdentity& self,
                                      const engine::StagedRanges& ranges, absl::Time deadline) {
  auto req = From<v1::StageRangesRequest>(self);
  req.set_region_id(ranges.region_id);
  req.set_region(ranges.region);
  req.set_transfer_id(ranges.transfer_id);
  req.set_first(ranges.first);
  req.set_offsets(ranges.offsets);
  req.set_lengths(ranges.lengths);
  v1::StageRangesResponse resp;
  return Call(address, deadline, &v1::PeerService::Stub::StageRanges, req, &resp);
}

absl::StatusOr<std::string> GrpcPeerRpc::ChecksumBlocks(const std::string& address,
                                                        const engine::NodeIdentity& self,
                                                        const engine::ChecksumQuery& query,
                                                        absl::Time deadline) {
  auto req = From<v1::ChecksumBlocksRequest>(self);
  req.set_region_id(query.region_id);
  req.set_region(query.region);
  req.set_offsets(query.offsets);
  req.set_lengths(query.lengths);
  req.set_expected(query.expected);
  if (query.notice.has_value()) ToProto(*query.notice, req.mutable_notice());
  v1::ChecksumBlocksResponse resp;
  RETURN_IF_ERROR(Call(address, deadline, &v1::PeerService::Stub::ChecksumBlocks, req, &resp));
  return std::move(*resp.mutable_checksums());
}

absl::StatusOr<transport::LinkEndpoints> GrpcPeerRpc::RejoinDevices(
    const std::string& address, const engine::NodeIdentity& self,
    const transport::LinkEndpoints& offer, absl::Time deadline) {
  auto req = From<v1::RejoinDevicesRequest>(self);
  ToProto(offer, req.mutable_offer());
  v1::RejoinDevicesResponse resp;
  RETURN_IF_ERROR(Call(address, deadline, &v1::PeerService::Stub::RejoinDevices, req, &resp));
  // No answer: the callee took no pair.
  if (!resp.has_answer()) return transport::LinkEndpoints{offer.kind};
  return FromProto(resp.answer());
}

absl::Status GrpcPeerRpc::CommitRejoin(const std::string& address, const engine::NodeIdentity& self,
                                       const std::vector<uint32_t>& devices, absl::Time deadline) {
  auto req = From<v1::CommitRejoinRequest>(self);
  for (uint32_t d : devices) req.add_devices(d);
  v1::CommitRejoinResponse resp;
  return Call(address, deadline, &v1::PeerService::Stub::CommitRejoin, req, &resp);
}

absl::StatusOr<uint64_t> GrpcPeerRpc::Ping(const std::string& address,
                                           const engine::NodeIdentity& self, absl::Time deadline) {
  auto req = From<v1::PingRequest>(self);
  v1::PingResponse resp;
  RETURN_IF_ERROR(Call(address, deadline, &v1::PeerService::Stub::Ping, req, &resp));
  return resp.incarnation();
}

}  // namespace xferd::service
