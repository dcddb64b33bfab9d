// The client-facing gRPC service (xferd.v1.Xferd). Handlers validate and hand
// work to the engine; replies that depend on slow work (registration,
// handshakes, resolution, waiting for a transfer) are sent from the engine's
// completion callbacks, so no gRPC thread ever blocks.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/cluster/directory.h"
#include "daemon/engine/engine.h"
#include "daemon/service/blocks_convert.h"
#include "daemon/service/caller.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/transfer_watch.h"
#include "xferd/v1/xferd.grpc.pb.h"

namespace xferd::service {

// What NodeInfo reports besides the engine's own state.
struct NodeDescription {
  std::string version;
  std::string transport_reason;
  std::string unix_socket;
  std::string local_socket;  // empty without request rings
  absl::Time started_at;
  std::string security;  // NodeInfo.security
};

class XferdServiceImpl final : public v1::Xferd::CallbackService {
 public:
  XferdServiceImpl(engine::Engine& engine, NodeDescription node);

  grpc::ServerUnaryReactor* RegisterRegion(grpc::CallbackServerContext* context,
                                           const v1::RegisterRegionRequest* request,
                                           v1::Region* response) override;
  grpc::ServerUnaryReactor* DeregisterRegion(grpc::CallbackServerContext* context,
                                             const v1::DeregisterRegionRequest* request,
                                             v1::DeregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* SetRegionAcl(grpc::CallbackServerContext* context,
                                         const v1::SetRegionAclRequest* request,
                                         v1::Region* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const v1::ListRegionsRequest* request,
                                        v1::ListRegionsResponse* response) override;
  grpc::ServerWriteReactor<v1::RegionEvent>* WatchRegion(
      grpc::CallbackServerContext* context, const v1::WatchRegionRequest* request) override;

  grpc::ServerUnaryReactor* ConnectPeer(grpc::CallbackServerContext* context,
                                        const v1::ConnectPeerRequest* request,
                                        v1::Peer* response) override;
  grpc::ServerUnaryReactor* ListPeers(grpc::CallbackServerContext* context,
                                      const v1::ListPeersRequest* request,
                                      v1::ListPeersResponse* response) override;
  grpc::ServerUnaryReactor* DisconnectPeer(grpc::CallbackServerContext* context,
                                           const v1::DisconnectPeerRequest* request,
                                           v1::DisconnectPeerResponse* response) override;

  grpc::ServerUnaryReactor* Write(grpc::CallbackServerContext* context,
                                  const v1::WriteRequest* request, v1::Transfer* response) override;
  grpc::ServerUnaryReactor* Read(grpc::CallbackServerContext* context,
                                 const v1::ReadRequest* request, v1::Transfer* response) override;
  // xferd_blocks.cc
  grpc::ServerReadReactor<v1::TransferChunk>* SubmitStream(grpc::CallbackServerContext* context,
                                                           v1::Transfer* response) override;
  grpc::ServerUnaryReactor* PrepareLayout(grpc::CallbackServerContext* context,
                                          const v1::PrepareLayoutRequest* request,
                                          v1::Layout* response) override;
  grpc::ServerUnaryReactor* DeleteLayout(grpc::CallbackServerContext* context,
                                         const v1::DeleteLayoutRequest* request,
                                         v1::DeleteLayoutResponse* response) override;
  grpc::ServerUnaryReactor* ListLayouts(grpc::CallbackServerContext* context,
                                        const v1::ListLayoutsRequest* request,
                                        v1::ListLayoutsResponse* response) override;
  grpc::ServerUnaryReactor* SubmitBatch(grpc::CallbackServerContext* context,
                                        const v1::SubmitBatchRequest* request,
                                        v1::SubmitBatchResponse* response) override;
  grpc::ServerUnaryReactor* GetTransfer(grpc::CallbackServerContext* context,
                                        const v1::GetTransferRequest* request,
                                        v1::Transfer* response) override;
  grpc::ServerUnaryReactor* ListTransfers(grpc::CallbackServerContext* context,
                                          const v1::ListTransfersRequest* request,
                                          v1::ListTransfersResponse* response) override;
  grpc::ServerWriteReactor<v1::Transfer>* WatchTransfer(
      grpc::CallbackServerContext* context, const v1::WatchTransferRequest* request) override;
  grpc::ServerUnaryReactor* WaitTransfer(grpc::CallbackServerContext* context,
                                         const v1::WaitTransferRequest* request,
                                         v1::Transfer* response) override;
  grpc::ServerUnaryReactor* CancelTransfer(grpc::CallbackServerContext* context,
                                           const v1::CancelTransferRequest* request,
                                           v1::Transfer* response) override;

  grpc::ServerUnaryReactor* GetNodeInfo(grpc::CallbackServerContext* context,
                                        const v1::GetNodeInfoRequest* request,
                                        v1::NodeInfo* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* context,
                                     const v1::GetStatsRequest* request,
                                     v1::Stats* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;

  // xferd_cluster.cc: the cluster directory, when [cluster] is configured.
  // main sets it once it has joined, before it announces the daemon ready
  // (and clears it before the directory goes away).
  void SetDirectory(cluster::Directory* directory);
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext* context,
                                      const v1::ListNodesRequest* request,
                                      v1::ListNodesResponse* response) override;
  grpc::ServerUnaryReactor* FindRegion(grpc::CallbackServerContext* context,
                                       const v1::FindRegionRequest* request,
                                       v1::FindRegionResponse* response) override;

 private:
  friend class SubmitStreamReactor;
  // Submits writes and reads, and replies through `finish` when they are
  // queued or, once queued, when all have ended but no later than `linger`
  // (zero: at once; absl::InfiniteDuration(): a submission with wait; a
  // finite linger only holds submissions of at most 1 MiB).
  // `fill` writes the reply.
  void SubmitAndReply(const engine::Tenant& tenant, std::vector<engine::TransferSpec> writes,
                      bool batch, absl::Duration linger,
                      std::function<void(const grpc::Status&)> finish,
                      std::function<void(const std::vector<engine::TransferInfo>&)> fill);
  // Write and Read: one transfer, replied with its snapshot.
  grpc::ServerUnaryReactor* SubmitOne(grpc::CallbackServerContext* context,
                                      absl::StatusOr<Submission> submission,
                                      v1::Transfer* response);
  // The tenant the call acts for (caller.h).
  const engine::Tenant& Caller(const grpc::ServerContextBase& context) const {
    return CallerTenant(context, engine_.tenants());
  }
  // A transfer of `tenant`'s, live or from history: NOT_FOUND, or
  // PERMISSION_DENIED for another tenant's.
  absl::StatusOr<engine::TransferInfo> GetOwnTransfer(uint64_t id,
                                                      const engine::Tenant& tenant) const;
  std::shared_ptr<engine::Transfer> FindOwnTransfer(uint64_t id,
                                                    const engine::Tenant& tenant) const;
  static std::function<void(const grpc::Status&)> FinishWith(grpc::ServerUnaryReactor* reactor) {
    return [reactor](const grpc::Status& status) { reactor->Finish(status); };
  }
  // Fills a reply of one transfer with its snapshot.
  static std::function<void(const std::vector<engine::TransferInfo>&)> FillOne(
      v1::Transfer* response) {
    return [response](const std::vector<engine::TransferInfo>& infos) {
      ToProto(infos.front(), response);
    };
  }

  engine::Engine& engine_;
  NodeDescription node_;
  std::atomic<cluster::Directory*> directory_{nullptr};
  // Runs the watches and waiting replies; declared last, so it stops first.
  WatchLoop watch_loop_;
};

// NodeInfo.directory of `directory` (null: left unset, not enabled).
void FillDirectoryStatus(const cluster::Directory* directory, v1::DirectoryStatus* out);

// Finishes a unary call at once with `status` (gRPC thread).
grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status);

}  // namespace xferd::service
