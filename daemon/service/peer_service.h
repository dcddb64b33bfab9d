// The daemon-to-daemon gRPC service (xferd.v1.PeerService): checks who is
// calling (PeerAuth), converts requests and hands them to the engine. All
// calls are quick; none blocks.
#pragma once

#include "daemon/engine/engine.h"
#include "daemon/service/peer_auth.h"
#include "xferd/v1/peer.grpc.pb.h"

namespace xferd::service {

class PeerServiceImpl final : public v1::PeerService::CallbackService {
 public:
  // `auth` decides who may call (default: the insecure mode, which still
  // refuses the unix socket).
  explicit PeerServiceImpl(engine::Engine& engine, PeerAuth auth = PeerAuth(/*mtls=*/false))
      : engine_(engine), auth_(auth) {}

  grpc::ServerUnaryReactor* Handshake(grpc::CallbackServerContext* context,
                                      const v1::HandshakeRequest* request,
                                      v1::HandshakeResponse* response) override;
  grpc::ServerUnaryReactor* ResolveRegion(grpc::CallbackServerContext* context,
                                          const v1::ResolveRegionRequest* request,
                                          v1::ResolveRegionResponse* response) override;
  grpc::ServerUnaryReactor* InvalidateRegion(grpc::CallbackServerContext* context,
                                             const v1::InvalidateRegionRequest* request,
                                             v1::InvalidateRegionResponse* response) override;
  grpc::ServerUnaryReactor* Goodbye(grpc::CallbackServerContext* context,
                                    const v1::GoodbyeRequest* request,
                                    v1::GoodbyeResponse* response) override;
  grpc::ServerUnaryReactor* StageRanges(grpc::CallbackServerContext* context,
                                        const v1::StageRangesRequest* request,
                                        v1::StageRangesResponse* response) override;
  grpc::ServerUnaryReactor* ChecksumBlocks(grpc::CallbackServerContext* context,
                                           const v1::ChecksumBlocksRequest* request,
                                           v1::ChecksumBlocksResponse* response) override;
  grpc::ServerUnaryReactor* RejoinDevices(grpc::CallbackServerContext* context,
                                          const v1::RejoinDevicesRequest* request,
                                          v1::RejoinDevicesResponse* response) override;
  grpc::ServerUnaryReactor* CommitRejoin(grpc::CallbackServerContext* context,
                                         const v1::CommitRejoinRequest* request,
                                         v1::CommitRejoinResponse* response) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const v1::PingRequest* request,
                                 v1::PingResponse* response) override;

 private:
  engine::Engine& engine_;
  const PeerAuth auth_;
};

}  // namespace xferd::service
