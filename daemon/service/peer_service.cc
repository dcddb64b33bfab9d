#include "daemon/service/peer_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/service/peer_convert.h"
#include "daemon/service/status_convert.h"

namespace xferd::service {
namespace {

// Bound on a resolution when the caller set no (or a longer) deadline.
constexpr absl::Duration kResolveTimeout = absl::Seconds(10);

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* PeerServiceImpl::Handshake(grpc::CallbackServerContext* context,
                                                     const v1::HandshakeRequest* request,
                                                     v1::HandshakeResponse* response) {
  if (request->version() != v1::PROTOCOL_VERSION_1) {
    return Reply(context, absl::FailedPreconditionError(
                              absl::StrCat("protocol version ", request->version(),
                                           " is not supported (this daemon speaks version 1)")));
  }
  if (absl::Status s = auth_.CheckCaller(*context, request->caller().node_id()); !s.ok()) {
    return Reply(context, s);
  }
  if (absl::Status s = auth_.CheckAdvertised(*context, "gRPC address", request->caller().address());
      !s.ok()) {
    return Reply(context, s);
  }
  if (absl::Status s =
          auth_.CheckAdvertised(*context, "TCP data host", request->endpoints().tcp().host());
      !s.ok()) {
    return Reply(context, s);
  }
  absl::StatusOr<engine::HandshakeMessage> message =
      FromProto(request->caller(), request->endpoints());
  if (!message.ok()) return Reply(context, message.status());
  message->link_id = request->link_id();
  absl::StatusOr<engine::HandshakeMessage> reply = engine_.AcceptHandshake(*message);
  if (!reply.ok()) return Reply(context, reply.status());
  response->set_version(v1::PROTOCOL_VERSION_1);
  ToProto(reply->node, response->mutable_callee());
  ToProto(reply->endpoints, response->mutable_endpoints());
  response->set_link_id(reply->link_id);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PeerServiceImpl::ResolveRegion(grpc::CallbackServerContext* context,
                                                         const v1::ResolveRegionRequest* request,
                                                         v1::ResolveRegionResponse* response) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  if (!engine_.ready()) return Reply(context, absl::UnavailableError("daemon is starting up"));
  // Binding keys to the caller's link waits for the pollers: not here.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline =
      std::min(absl::FromChrono(context->deadline()), absl::Now() + kResolveTimeout);
  engine_.ServeResolve(request->node_id(), request->incarnation(), request->link_id(),
                       request->region(), deadline,
                       [reactor, response](absl::StatusOr<engine::ResolvedRegion> region) {
                         if (region.ok()) ToProto(*region, response);
                         reactor->Finish(ToGrpc(region.status()));
                       });
  return reactor;
}

grpc::ServerUnaryReactor* PeerServiceImpl::InvalidateRegion(
    grpc::CallbackServerContext* context, const v1::InvalidateRegionRequest* request,
    v1::InvalidateRegionResponse*) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  return Reply(context, engine_.OnRegionInvalidated(request->node_id(), request->incarnation(),
                                                    request->region_id(), request->region()));
}

grpc::ServerUnaryReactor* PeerServiceImpl::Goodbye(grpc::CallbackServerContext* context,
                                                   const v1::GoodbyeRequest* request,
                                                   v1::GoodbyeResponse*) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  return Reply(context,
               engine_.OnGoodbye(request->node_id(), request->incarnation(), request->reason()));
}

grpc::ServerUnaryReactor* PeerServiceImpl::StageRanges(grpc::CallbackServerContext* context,
                                                       const v1::StageRangesRequest* request,
                                                       v1::StageRangesResponse*) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  engine::StagedRanges ranges;
  ranges.region_id = request->region_id();
  ranges.region = request->region();
  ranges.transfer_id = request->transfer_id();
  ranges.first = request->first();
  ranges.offsets = request->offsets();
  ranges.lengths = request->lengths();
  return Reply(context, engine_.OnStageRanges(request->node_id(), request->incarnation(), ranges));
}

grpc::ServerUnaryReactor* PeerServiceImpl::ChecksumBlocks(grpc::CallbackServerContext* context,
                                                          const v1::ChecksumBlocksRequest* request,
                                                          v1::ChecksumBlocksResponse* response) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  engine::ChecksumQuery query;
  query.region_id = request->region_id();
  query.region = request->region();
  query.offsets = request->offsets();
  query.lengths = request->lengths();
  query.expected = request->expected();
  if (request->has_notice()) query.notice = FromProto(request->notice());
  absl::StatusOr<std::string> sums =
      engine_.OnChecksumBlocks(request->node_id(), request->incarnation(), query);
  if (sums.ok()) *response->mutable_checksums() = *std::move(sums);
  return Reply(context, sums.status());
}

grpc::ServerUnaryReactor* PeerServiceImpl::RejoinDevices(grpc::CallbackServerContext* context,
                                                         const v1::RejoinDevicesRequest* request,
                                                         v1::RejoinDevicesResponse* response) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  absl::StatusOr<transport::LinkEndpoints> offer = FromProto(request->offer());
  if (!offer.ok()) return Reply(context, offer.status());
  absl::StatusOr<transport::LinkEndpoints> answer =
      engine_.AcceptRejoin(request->node_id(), request->incarnation(), *offer);
  if (!answer.ok()) return Reply(context, answer.status());
  if (!answer->devices.empty()) ToProto(*answer, response->mutable_answer());
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PeerServiceImpl::CommitRejoin(grpc::CallbackServerContext* context,
                                                        const v1::CommitRejoinRequest* request,
                                                        v1::CommitRejoinResponse*) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  if (request->devices_size() > static_cast<int>(transport::kMaxDevices)) {
    return Reply(context, absl::InvalidArgumentError("commit names too many RDMA devices"));
  }
  const std::vector<uint32_t> devices(request->devices().begin(), request->devices().end());
  return Reply(context,
               engine_.OnCommitRejoin(request->node_id(), request->incarnation(), devices));
}

grpc::ServerUnaryReactor* PeerServiceImpl::Ping(grpc::CallbackServerContext* context,
                                                const v1::PingRequest* request,
                                                v1::PingResponse* response) {
  if (absl::Status s = auth_.CheckCaller(*context, request->node_id()); !s.ok()) {
    return Reply(context, s);
  }
  if (!engine_.ready()) return Reply(context, absl::UnavailableError("daemon is starting up"));
  response->set_incarnation(engine_.self().incarnation);
  return Reply(context, absl::OkStatus());
}

}  // namespace xferd::service
