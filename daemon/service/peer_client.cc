#include "daemon/service/peer_client.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/service/peer_convert.h"
#include "daemon/service/status_convert.h"

namespace xferd::service {
namespace {

void SetDeadline(grpc::ClientContext& context, absl::Time deadline) {
  context.set_deadline(absl::ToChronoTime(deadline));
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

v1::PeerService::Stub& GrpcPeerRpc::StubFor(const std::string& address) {
  MutexLock lock(&mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    stub = v1::PeerService::NewStub(grpc::CreateChannel(address, credentials_));
  }
  return *stub;
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
  SetDeadline(context, deadline);
  absl::Status status = Finish(StubFor(address).Handshake(&context, req, &resp), address);
  if (!status.ok()) return status;
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
  v1::ResolveRegionRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  req.set_region(region);
  req.set_link_id(link_id);
  v1::ResolveRegionResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  absl::Status status = Finish(StubFor(address).ResolveRegion(&context, req, &resp), address);
  if (!status.ok()) return status;
  return FromProto(resp);
}

absl::Status GrpcPeerRpc::InvalidateRegion(const std::string& address,
                                           const engine::NodeIdentity& self, uint32_t region_id,
                                           const std::string& region, absl::Time deadline) {
  v1::InvalidateRegionRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  req.set_region_id(region_id);
  req.set_region(region);
  v1::InvalidateRegionResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  return Finish(StubFor(address).InvalidateRegion(&context, req, &resp), address);
}

absl::Status GrpcPeerRpc::Goodbye(const std::string& address, const engine::NodeIdentity& self,
                                  const std::string& reason, absl::Time deadline) {
  v1::GoodbyeRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  req.set_reason(reason);
  v1::GoodbyeResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  return Finish(StubFor(address).Goodbye(&context, req, &resp), address);
}

absl::Status GrpcPeerRpc::StageRanges(const std::string& address,
                                      const engine::NodeIdentity& self,
                                      const engine::StagedRanges& ranges, absl::Time deadline) {
  v1::StageRangesRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  req.set_region_id(ranges.region_id);
  req.set_region(ranges.region);
  req.set_transfer_id(ranges.transfer_id);
  req.set_first(ranges.first);
  req.set_offsets(ranges.offsets);
  req.set_lengths(ranges.lengths);
  v1::StageRangesResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  return Finish(StubFor(address).StageRanges(&context, req, &resp), address);
}

absl::StatusOr<transport::LinkEndpoints> GrpcPeerRpc::RejoinDevices(
    const std::string& address, const engine::NodeIdentity& self,
    const transport::LinkEndpoints& offer, absl::Time deadline) {
  v1::RejoinDevicesRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  ToProto(offer, req.mutable_offer());
  v1::RejoinDevicesResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  RETURN_IF_ERROR(Finish(StubFor(address).RejoinDevices(&context, req, &resp), address));
  // No answer: the callee took no pair.
  if (!resp.has_answer()) return transport::LinkEndpoints{offer.kind};
  return FromProto(resp.answer());
}

absl::Status GrpcPeerRpc::CommitRejoin(const std::string& address, const engine::NodeIdentity& self,
                                       const std::vector<uint32_t>& devices, absl::Time deadline) {
  v1::CommitRejoinRequest req;
  req.set_node_id(self.node_id);
  req.set_incarnation(self.incarnation);
  for (uint32_t d : devices) req.add_devices(d);
  v1::CommitRejoinResponse resp;
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  return Finish(StubFor(address).CommitRejoin(&context, req, &resp), address);
}

}  // namespace xferd::service
