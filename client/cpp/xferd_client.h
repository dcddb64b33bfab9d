// C++ client of one xferd daemon: a gRPC channel to it, one typed blocking
// method per RPC of xferd.v1.Xferd, and helpers built on its streams
// (WaitTransfer, WatchRegion). Every error is an absl::Status carrying the
// daemon's gRPC code and message unchanged.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/local_rings.h"
#include "client/cpp/region_watch.h"
#include "client/cpp/shm_region.h"
#include "xferd/v1/xferd.grpc.pb.h"

namespace xferd::client {

struct ClientOptions {
  // Bound on each unary call. Writes and batches with `wait` are bounded by
  // their own transfer timeout (plus this much) instead, or not at all.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Channel credentials for Connect (e.g. TlsCredentials); null: plain.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Over a unix socket, send writes and reads through the daemon's request
  // rings (docs/local-rings.md) when it serves them; else, and when false,
  // over gRPC. Nothing else changes for the caller.
  bool rings = true;
  RingOptions ring_options;
};

// mTLS credentials from PEM files: `ca` verifies the daemon (its certificate
// must name the target's host); `cert` and `key` (both or neither) are the
// client's own. INVALID_ARGUMENT naming a file that cannot be read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const std::string& ca,
                                                                         const std::string& cert,
                                                                         const std::string& key);

// Called with each snapshot WaitTransfer receives, the terminal one included.
using ProgressCallback = std::function<void(const v1::Transfer&)>;

struct WaitOptions {
  // Minimum time between progress snapshots (the daemon enforces >= 10 ms).
  absl::Duration interval = absl::Milliseconds(100);
};

// absl::Status with the code and message of a gRPC status.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Thread safety: every method may be called from any thread, concurrently;
// each call blocks the calling thread until its reply (or error) arrives.
// Errors: the daemon's status (see xferd.proto for each RPC's codes), or
// DEADLINE_EXCEEDED / UNAVAILABLE from gRPC itself.
class Client {
 public:
  // Opens a channel to `target` ("host:port" or "unix:/path") and waits up to
  // `timeout` for it to be ready. Errors: INVALID_ARGUMENT (empty target),
  // UNAVAILABLE (no daemon answered in time).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         absl::Duration timeout,
                                                         ClientOptions options = {});

  // For tests and embedders that built their own channel (not checked).
  Client(std::string target, std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  const std::string& target() const { return target_; }
  // The request rings writes and reads go through, or null (gRPC).
  LocalRings* rings() const { return rings_.get(); }

  // ---- regions ----
  // `request.backing` is required (INVALID_ARGUMENT without one).
  absl::StatusOr<v1::Region> RegisterRegion(const v1::RegisterRegionRequest& request);
  absl::StatusOr<v1::DeregisterRegionResponse> DeregisterRegion(const std::string& name,
                                                                bool force = false);
  // Maps SHM region `name` of this daemon (shm_region.h) through its local
  // socket. FAILED_PRECONDITION when the client does not talk over a unix
  // socket (only a client on the daemon's host can map its memory), else as
  // ShmRegion::Open. Any thread.
  absl::StatusOr<std::unique_ptr<ShmRegion>> MapShmRegion(const std::string& name) const;
  // Replaces the region's ACL (empty: any authenticated peer).
  absl::StatusOr<v1::Region> SetRegionAcl(const std::string& name,
                                          const std::vector<std::string>& allowed_peers);
  absl::StatusOr<v1::ListRegionsResponse> ListRegions();
  // Subscribes to the region's events and returns once SUBSCRIBED arrived
  // (no later landing is missed; Next() yields SUBSCRIBED first), waiting
  // up to `timeout` for it. The caller
  // owns the watch; it holds its own reference to the channel, so it may
  // outlive the Client. `ranges`: landed events of many-block transfers
  // carry their ranges (RegionEvent.range_offsets / range_lengths; the
  // region must have landed_ranges; LandedRanges() unpacks them).
  // Errors: NOT_FOUND (no such region), FAILED_PRECONDITION (ranges asked of
  // a region without landed_ranges), DEADLINE_EXCEEDED, the stream's error.
  absl::StatusOr<std::unique_ptr<RegionWatch>> WatchRegion(const std::string& name,
                                                           absl::Duration timeout,
                                                           bool ranges = false);

  // ---- peers ----
  // `timeout` bounds the handshake; zero means the daemon's default (10 s).
  absl::StatusOr<v1::Peer> ConnectPeer(const std::string& address,
                                       absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<v1::ListPeersResponse> ListPeers();
  absl::StatusOr<v1::DisconnectPeerResponse> DisconnectPeer(const std::string& peer);

  // ---- transfers ----
  // Queues the write (or, with request.wait, returns once it has ended).
  absl::StatusOr<v1::Transfer> Write(const v1::WriteRequest& request);
  absl::StatusOr<v1::SubmitBatchResponse> SubmitBatch(const v1::SubmitBatchRequest& request);
  absl::StatusOr<v1::Transfer> Read(const v1::ReadRequest& request);
  // A write or read with any number of blocks: sent
  // as one message when it fits kMaxMessageBytes, otherwise streamed
  // (SubmitStream) in chunks of about that size. One transfer either way.
  // Errors: the daemon's (the first failing block is named).
  absl::StatusOr<v1::Transfer> WriteBlocks(const v1::WriteRequest& request);
  absl::StatusOr<v1::Transfer> ReadBlocks(const v1::ReadRequest& request);
  static constexpr size_t kMaxMessageBytes = 1 << 20;

  // ---- prepared layouts ----
  absl::StatusOr<v1::Layout> PrepareLayout(const v1::PrepareLayoutRequest& request);
  absl::StatusOr<v1::DeleteLayoutResponse> DeleteLayout(const std::string& name);
  absl::StatusOr<v1::ListLayoutsResponse> ListLayouts();
  absl::StatusOr<v1::Transfer> GetTransfer(uint64_t id);
  // Lists page; these follow every page (ListTransfers: up to request.limit
  // transfers if set, newest first) and return them in one response.
  absl::StatusOr<v1::ListTransfersResponse> ListTransfers(
      const v1::ListTransfersRequest& request = {});
  absl::StatusOr<v1::Transfer> CancelTransfer(uint64_t id);
  // Waits until the transfer ends and returns the terminal snapshot (a
  // FAILED or CANCELLED transfer is a successful return: see its error).
  // With `on_progress`, watches it (WatchTransfer), calling `on_progress` on
  // the calling thread with each snapshot; without, one WaitTransfer call.
  // Blocks without a client deadline: the transfer's own timeout bounds it.
  // Errors: NOT_FOUND (unknown id), the call's error, INTERNAL if the
  // stream ended before a terminal snapshot.
  absl::StatusOr<v1::Transfer> WaitTransfer(uint64_t id, const ProgressCallback& on_progress = {},
                                            const WaitOptions& options = {});

  // ---- node ----
  absl::StatusOr<v1::NodeInfo> GetNodeInfo();
  absl::StatusOr<v1::Stats> GetStats();
  absl::StatusOr<v1::ListDevicesResponse> ListDevices();

  // ---- cluster directory (a daemon with [cluster]) ----
  // Every live daemon of the directory with its regions, from the daemon's
  // cache (while etcd is out of reach: as last seen, state "cached").
  // Errors: FAILED_PRECONDITION (no [cluster]).
  absl::StatusOr<v1::ListNodesResponse> ListNodes();
  // The live daemons' regions named `name`. Errors: as ListNodes, NOT_FOUND,
  // UNAVAILABLE naming etcd (a name not cached while etcd is out of reach).
  absl::StatusOr<v1::FindRegionResponse> FindRegion(const std::string& name);

 private:
  // Runs one unary call with a deadline `timeout` from now (none if infinite).
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::Xferd::Stub::*method)(grpc::ClientContext*,
                                                                        const Request&, Response*),
                                const Request& request, absl::Duration timeout);
  // Every page of a paged List call, merged into one response in the
  // server's order; with `limit` > 0 at most that many items. `items` is
  // the response's repeated field (e.g. &ListRegionsResponse::mutable_regions).
  template <typename Request, typename Response, typename Items>
  absl::StatusOr<Response> AllPages(grpc::Status (v1::Xferd::Stub::*method)(grpc::ClientContext*,
                                                                            const Request&,
                                                                            Response*),
                                    Request request, Items* (Response::*items)(),
                                    uint32_t limit = 0);
  // Deadline for a write or batch that may wait for its transfers to end.
  absl::Duration WaitingCallTimeout(bool wait, const v1::WriteRequest* bounded_by) const;
  // A write or read through the rings: the final completion with `wait`;
  // else the queued notice (requests with a linger keep to gRPC).
  absl::StatusOr<v1::Transfer> RingCall(const RingRequest& request, bool wait,
                                        absl::Duration timeout);
  // Opens the rings for a unix target whose daemon serves them.
  void OpenRings();
  // Streams `first` (a write or read without blocks) and `blocks` in chunks.
  absl::StatusOr<v1::Transfer> Stream(v1::TransferChunk first, const v1::Blocks& blocks,
                                      absl::Duration timeout);

  const std::string target_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Xferd::Stub> stub_;
  const ClientOptions options_;
  std::unique_ptr<LocalRings> rings_;
  // For ring snapshots: what the daemon's NodeInfo says.
  v1::TransportKind transport_ = v1::TRANSPORT_KIND_UNSPECIFIED;
  uint64_t default_slice_ = 0;
};

// The ranges of a landed event (offset, length), unpacked from its packed
// range_offsets / range_lengths; empty when it has none. Pure: any thread.
std::vector<std::pair<uint64_t, uint64_t>> LandedRanges(const v1::RegionEvent& event);

// True for DONE, FAILED and CANCELLED.
bool IsTerminal(v1::TransferState state);

// OK for a DONE transfer; otherwise its error as a status (FAILED and
// CANCELLED), or FAILED_PRECONDITION if it has not ended yet.
absl::Status TransferOutcome(const v1::Transfer& transfer);

}  // namespace xferd::client
