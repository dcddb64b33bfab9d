// engine::PeerRpc over gRPC: blocking calls with deadlines on cached channels,
// one per peer address, dropped after a call that timed out or found the peer
// unreachable (the next call connects anew). Called from the engine's control
// executor only. With mTLS, a handshake's callee must present a certificate
// naming the node id it answers with (PeerAuth), and connection failures say
// what mTLS needs.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "daemon/base/mutex.h"
#include "daemon/engine/peer_rpc.h"
#include "daemon/service/peer_auth.h"
#include "xferd/v1/peer.grpc.pb.h"

namespace xferd::service {

class GrpcPeerRpc final : public engine::PeerRpc {
 public:
  // `auth`: mTLS checks of the callee (default: the insecure mode).
  explicit GrpcPeerRpc(std::shared_ptr<grpc::ChannelCredentials> credentials,
                       PeerAuth auth = PeerAuth(/*mtls=*/false));

  absl::StatusOr<engine::HandshakeMessage> Handshake(const std::string& address,
                                                     const engine::HandshakeMessage& request,
                                                     absl::Time deadline) override;
  absl::StatusOr<engine::ResolvedRegion> ResolveRegion(const std::string& address,
                                                       const engine::NodeIdentity& self,
                                                       uint64_t link_id, const std::string& region,
                                                       absl::Time deadline) override;
  absl::Status InvalidateRegion(const std::string& address, const engine::NodeIdentity& self,
                                uint32_t region_id, const std::string& region,
                                absl::Time deadline) override;
  absl::Status StageRanges(const std::string& address, const engine::NodeIdentity& self,
                           const engine::StagedRanges& ranges, absl::Time deadline) override;
  absl::Status Goodbye(const std::string& address, const engine::NodeIdentity& self,
                       const std::string& reason, absl::Time deadline) override;
  absl::StatusOr<transport::LinkEndpoints> RejoinDevices(const std::string& address,
                                                         const engine::NodeIdentity& self,
                                                         const transport::LinkEndpoints& offer,
                                                         absl::Time deadline) override;
  absl::Status CommitRejoin(const std::string& address, const engine::NodeIdentity& self,
                            const std::vector<uint32_t>& devices, absl::Time deadline) override;
  absl::StatusOr<uint64_t> Ping(const std::string& address, const engine::NodeIdentity& self,
                                absl::Time deadline) override;
  absl::StatusOr<std::string> ChecksumBlocks(const std::string& address,
                                             const engine::NodeIdentity& self,
                                             const engine::ChecksumQuery& query,
                                             absl::Time deadline) override;

 private:
  using Stub = v1::PeerService::Stub;
  std::shared_ptr<Stub> StubFor(const std::string& address);
  // After a call on `stub` that timed out or could not reach the peer: its
  // connection may be stalled rather than closed (a partition drops packets
  // without a reset, and TCP then retransmits at backed-off intervals, up to
  // minutes apart, long after the network healed), so the next call to
  // `address` opens a new one.
  void Forget(const std::string& address, const std::shared_ptr<Stub>& stub);
  // The status of a finished call, with what mTLS needs when it failed to connect.
  absl::Status Finish(const grpc::Status& status, const std::string& address) const;
  // One call of `method` on the peer service at `address`, bounded by
  // `deadline`; its status as Finish gives it. `context`: the caller's, to
  // read the callee's certificate afterwards (null: one of its own).
  template <typename Request, typename Response>
  absl::Status Call(const std::string& address, absl::Time deadline,
                    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                    const Request& request, Response* response,
                    grpc::ClientContext* context = nullptr) {
    grpc::ClientContext own;
    if (context == nullptr) context = &own;
    context->set_deadline(absl::ToChronoTime(deadline));
    const std::shared_ptr<Stub> stub = StubFor(address);
    const grpc::Status status = ((*stub).*method)(context, request, response);
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
        status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      Forget(address, stub);
    }
    return Finish(status, address);
  }

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const PeerAuth auth_;
  Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::service
