#include "client/cpp/xferd_client.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/local_socket.h"
#include "client/cpp/ring_requests.h"
#include "daemon/base/endian.h"

namespace xferd::client {
namespace {

void SetDuration(absl::Duration d, google::protobuf::Duration* out) {
  const timespec ts = absl::ToTimespec(d);
  out->set_seconds(ts.tv_sec);
  out->set_nanos(static_cast<int32_t>(ts.tv_nsec));
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("cannot read ", what, " file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Bytes one block costs in its form's arrays.
size_t BytesPerBlock(const v1::Blocks& b) {
  switch (b.form_case()) {
    case v1::Blocks::kList:
      return b.list().lengths().empty() ? 16 : 24;
    case v1::Blocks::kLayout:
      return 8;
    default:
      return 48;  // a strided run per "block"
  }
}

size_t Count(const v1::Blocks& b) {
  switch (b.form_case()) {
    case v1::Blocks::kList:
      return b.list().src_offsets().size() / 8;
    case v1::Blocks::kLayout:
      return b.layout().src_indices().size() / 4;
    case v1::Blocks::kStrided:
      return static_cast<size_t>(b.strided().runs_size());
    default:
      return 0;
  }
}

// Blocks [first, first + n) of `b` (runs, for the strided form), as blocks
// of the same form. Layout names go in the first chunk only.
v1::Blocks Slice(const v1::Blocks& b, size_t first, size_t n) {
  v1::Blocks out;
  switch (b.form_case()) {
    case v1::Blocks::kList: {
      const v1::BlockList& l = b.list();
      v1::BlockList* o = out.mutable_list();
      o->set_src_offsets(l.src_offsets().substr(first * 8, n * 8));
      o->set_dst_offsets(l.dst_offsets().substr(first * 8, n * 8));
      if (!l.lengths().empty()) o->set_lengths(l.lengths().substr(first * 8, n * 8));
      o->set_block_length(l.block_length());
      break;
    }
    case v1::Blocks::kLayout: {
      const v1::LayoutBlocks& l = b.layout();
      v1::LayoutBlocks* o = out.mutable_layout();
      if (first == 0) {
        o->set_src_layout(l.src_layout());
        o->set_dst_layout(l.dst_layout());
      }
      o->set_src_indices(l.src_indices().substr(first * 4, n * 4));
      o->set_dst_indices(l.dst_indices().substr(first * 4, n * 4));
      break;
    }
    case v1::Blocks::kStrided:
      for (size_t i = first; i < first + n; ++i) {
        *out.mutable_strided()->add_runs() = b.strided().runs(static_cast<int>(i));
      }
      break;
    default:
      break;
  }
  return out;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // Both enumerations use the canonical google.rpc.Code values.
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

std::vector<std::pair<uint64_t, uint64_t>> LandedRanges(const v1::RegionEvent& event) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  const auto* offsets = reinterpret_cast<const uint8_t*>(event.range_offsets().data());
  const auto* lengths = reinterpret_cast<const uint8_t*>(event.range_lengths().data());
  const size_t n = std::min(event.range_offsets().size(), event.range_lengths().size()) / 8;
  ranges.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    ranges.emplace_back(LoadLE<uint64_t>(offsets + 8 * i), LoadLE<uint64_t>(lengths + 8 * i));
  }
  return ranges;
}

bool IsTerminal(v1::TransferState state) {
  return state == v1::TRANSFER_STATE_DONE || state == v1::TRANSFER_STATE_FAILED ||
         state == v1::TRANSFER_STATE_CANCELLED;
}

absl::Status TransferOutcome(const v1::Transfer& transfer) {
  if (transfer.state() == v1::TRANSFER_STATE_DONE) return absl::OkStatus();
  if (!IsTerminal(transfer.state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("transfer ", transfer.id(), " has not ended yet"));
  }
  const absl::StatusCode code = static_cast<absl::StatusCode>(transfer.error().code());
  if (code == absl::StatusCode::kOk) {  // a daemon that left the error out
    return absl::UnknownError(absl::StrCat("transfer ", transfer.id(), " ended in state ",
                                           v1::TransferState_Name(transfer.state())));
  }
  return absl::Status(code, transfer.error().message());
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentials(const std::string& ca,
                                                                         const std::string& cert,
                                                                         const std::string& key) {
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("give both a TLS certificate and its key, or neither");
  }
  grpc::SslCredentialsOptions options;
  absl::StatusOr<std::string> pem = ReadPem(ca, "TLS CA");
  if (!pem.ok()) return pem.status();
  options.pem_root_certs = *std::move(pem);
  if (!cert.empty()) {
    if (!(pem = ReadPem(cert, "TLS certificate")).ok()) return pem.status();
    options.pem_cert_chain = *std::move(pem);
    if (!(pem = ReadPem(key, "TLS key")).ok()) return pem.status();
    options.pem_private_key = *std::move(pem);
  }
  return grpc::SslCredentials(options);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        absl::Duration timeout,
                                                        ClientOptions options) {
  if (target.empty()) {
    return absl::InvalidArgumentError("empty target: expected host:port or unix:/path");
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      target,
      options.credentials != nullptr ? options.credentials : grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach xferd at ", target, " within ", absl::FormatDuration(timeout),
                     " (is the daemon running? check --target",
                     options.credentials != nullptr ? "; or the TLS handshake failed: check "
                                                      "--tls-ca, --tls-cert and --tls-key"
                                                    : "",
                     ")"));
  }
  auto client = std::make_unique<Client>(target, std::move(channel), options);
  client->OpenRings();
  return client;
}

void Client::OpenRings() {
  const std::string local_socket = LocalSocketFor(target_);
  if (!options_.rings || local_socket.empty()) return;
  absl::StatusOr<v1::NodeInfo> node = GetNodeInfo();
  // A daemon with no local socket (no unix socket, or older) names none.
  if (!node.ok() || node->local_socket().empty()) return;
  absl::StatusOr<std::unique_ptr<LocalRings>> rings =
      LocalRings::Open(local_socket, options_.ring_options);
  if (!rings.ok()) return;  // gRPC then: slower, never wrong
  rings_ = *std::move(rings);
  transport_ = node->transport();
  default_slice_ = node->default_slice_size();
}

absl::StatusOr<v1::Transfer> Client::RingCall(const RingRequest& request, bool wait,
                                              absl::Duration timeout) {
  RingRequest r = request;
  // A request not waited for runs on if this process exits, as over gRPC.
  r.queued_notice = !wait;
  r.detached = !wait;
  absl::StatusOr<uint64_t> user_data = rings_->Submit(r);
  if (!user_data.ok()) return user_data.status();
  const absl::Time deadline =
      timeout == absl::InfiniteDuration() ? absl::InfiniteFuture() : absl::Now() + timeout;
  absl::StatusOr<RingCompletion> done = rings_->Wait(*user_data, /*until_queued=*/!wait, deadline);
  if (!done.ok()) return done.status();
  if (done->queued) rings_->Forget(*user_data);  // followed by id over gRPC, if at all
  return TransferOf(r, *done, transport_, default_slice_);
}

Client::Client(std::string target, std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : target_(std::move(target)),
      channel_(std::move(channel)),
      stub_(v1::Xferd::NewStub(channel_)),
      options_(options) {}

template <typename Request, typename Response>
absl::StatusOr<Response> Client::Call(grpc::Status (v1::Xferd::Stub::*method)(grpc::ClientContext*,
                                                                              const Request&,
                                                                              Response*),
                                      const Request& request, absl::Duration timeout) {
  grpc::ClientContext context;
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  Response response;
  const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

template <typename Request, typename Response, typename Items>
absl::StatusOr<Response> Client::AllPages(
    grpc::Status (v1::Xferd::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    Request request, Items* (Response::*items)(), uint32_t limit) {
  Response all;
  while (true) {
    if (limit > 0) request.set_page_size(limit - static_cast<uint32_t>((all.*items)()->size()));
    absl::StatusOr<Response> page = Call(method, request, options_.rpc_timeout);
    if (!page.ok()) return page.status();
    for (auto& item : *((*page).*items)()) *(all.*items)()->Add() = std::move(item);
    const bool full = limit > 0 && static_cast<uint32_t>((all.*items)()->size()) >= limit;
    if (page->next_page_token().empty() || full) return all;
    request.set_page_token(page->next_page_token());
  }
}

absl::Duration Client::WaitingCallTimeout(bool wait, const v1::WriteRequest* bounded_by) const {
  if (!wait) return options_.rpc_timeout;
  if (bounded_by == nullptr || !bounded_by->has_timeout()) return absl::InfiniteDuration();
  return FromProtoDuration(bounded_by->timeout()) + options_.rpc_timeout;
}

// ---------------------------------------------------------------- regions --

absl::StatusOr<v1::Region> Client::RegisterRegion(const v1::RegisterRegionRequest& request) {
  return Call(&v1::Xferd::Stub::RegisterRegion, request, options_.rpc_timeout);
}

absl::StatusOr<v1::DeregisterRegionResponse> Client::DeregisterRegion(const std::string& name,
                                                                      bool force) {
  v1::DeregisterRegionRequest request;
  request.set_name(name);
  request.set_force(force);
  return Call(&v1::Xferd::Stub::DeregisterRegion, request, options_.rpc_timeout);
}

absl::StatusOr<std::unique_ptr<ShmRegion>> Client::MapShmRegion(const std::string& name) const {
  const std::string local_socket = LocalSocketFor(target_);
  if (local_socket.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("region '", name,
                     "': only a client on the daemon's host, over its unix socket, can map "
                     "an shm region; this one talks to ",
                     target_));
  }
  return ShmRegion::Open(local_socket, name);
}

absl::StatusOr<v1::Region> Client::SetRegionAcl(const std::string& name,
                                                const std::vector<std::string>& allowed_peers) {
  v1::SetRegionAclRequest request;
  request.set_name(name);
  for (const std::string& peer : allowed_peers) request.add_allowed_peers(peer);
  return Call(&v1::Xferd::Stub::SetRegionAcl, request, options_.rpc_timeout);
}

absl::StatusOr<v1::ListRegionsResponse> Client::ListRegions() {
  return AllPages(&v1::Xferd::Stub::ListRegions, v1::ListRegionsRequest(),
                  &v1::ListRegionsResponse::mutable_regions);
}

absl::StatusOr<std::unique_ptr<RegionWatch>> Client::WatchRegion(const std::string& name,
                                                                 absl::Duration timeout,
                                                                 bool ranges) {
  v1::WatchRegionRequest request;
  request.set_name(name);
  request.set_ranges(ranges);
  std::unique_ptr<RegionWatch> watch = RegionWatch::Start(*stub_, request);
  absl::Status subscribed = watch->AwaitSubscribed(timeout);
  if (!subscribed.ok()) return subscribed;
  return watch;
}

// ------------------------------------------------------------------ peers --

absl::StatusOr<v1::Peer> Client::ConnectPeer(const std::string& address, absl::Duration timeout) {
  v1::ConnectPeerRequest request;
  request.set_address(address);
  if (timeout > absl::ZeroDuration()) SetDuration(timeout, request.mutable_timeout());
  // The handshake may take the whole `timeout`; the call needs a bit more.
  return Call(&v1::Xferd::Stub::ConnectPeer, request, options_.rpc_timeout + timeout);
}

absl::StatusOr<v1::ListPeersResponse> Client::ListPeers() {
  return AllPages(&v1::Xferd::Stub::ListPeers, v1::ListPeersRequest(),
                  &v1::ListPeersResponse::mutable_peers);
}

absl::StatusOr<v1::DisconnectPeerResponse> Client::DisconnectPeer(const std::string& peer) {
  v1::DisconnectPeerRequest request;
  request.set_peer(peer);
  return Call(&v1::Xferd::Stub::DisconnectPeer, request, options_.rpc_timeout);
}

// -------------------------------------------------------------- transfers --

absl::StatusOr<v1::Transfer> Client::Write(const v1::WriteRequest& request) {
  const absl::Duration timeout = WaitingCallTimeout(request.wait(), &request);
  if (rings_ != nullptr) {
    if (std::optional<RingRequest> r = RingWrite(request, default_slice_)) {
      return RingCall(*r, request.wait(), timeout);
    }
  }
  return Call(&v1::Xferd::Stub::Write, request, timeout);
}

absl::StatusOr<v1::SubmitBatchResponse> Client::SubmitBatch(const v1::SubmitBatchRequest& request) {
  // The batch ends when its slowest write does: bounded by the largest timeout
  // only if every write has one.
  absl::Duration timeout = WaitingCallTimeout(request.wait(), nullptr);
  if (request.wait() && request.writes_size() > 0) {
    timeout = absl::ZeroDuration();
    for (const v1::WriteRequest& w : request.writes()) {
      timeout = std::max(timeout, WaitingCallTimeout(true, &w));
    }
  }
  return Call(&v1::Xferd::Stub::SubmitBatch, request, timeout);
}

absl::StatusOr<v1::Transfer> Client::GetTransfer(uint64_t id) {
  v1::GetTransferRequest request;
  request.set_id(id);
  return Call(&v1::Xferd::Stub::GetTransfer, request, options_.rpc_timeout);
}

absl::StatusOr<v1::ListTransfersResponse> Client::ListTransfers(
    const v1::ListTransfersRequest& request) {
  v1::ListTransfersRequest paged = request;
  paged.clear_limit();
  return AllPages(&v1::Xferd::Stub::ListTransfers, paged,
                  &v1::ListTransfersResponse::mutable_transfers, request.limit());
}

absl::StatusOr<v1::Transfer> Client::CancelTransfer(uint64_t id) {
  v1::CancelTransferRequest request;
  request.set_id(id);
  return Call(&v1::Xferd::Stub::CancelTransfer, request, options_.rpc_timeout);
}

absl::StatusOr<v1::Transfer> Client::WaitTransfer(uint64_t id, const ProgressCallback& on_progress,
                                                  const WaitOptions& options) {
  if (!on_progress) {
    // Only the end matters: one unary call instead of a stream.
    v1::WaitTransferRequest wait;
    wait.set_id(id);
    return Call(&v1::Xferd::Stub::WaitTransfer, wait, absl::InfiniteDuration());
  }
  v1::WatchTransferRequest request;
  request.set_id(id);
  SetDuration(options.interval, request.mutable_interval());
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::Transfer>> reader =
      stub_->WatchTransfer(&context, request);
  v1::Transfer snapshot;
  v1::Transfer last;
  while (reader->Read(&snapshot)) {
    if (on_progress) on_progress(snapshot);
    last = std::move(snapshot);
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!IsTerminal(last.state())) {
    return absl::InternalError(
        absl::StrCat("the watch of transfer ", id, " ended before the transfer did"));
  }
  return last;
}

// ---------------------------------------------------------- node and stats --

absl::StatusOr<v1::NodeInfo> Client::GetNodeInfo() {
  return Call(&v1::Xferd::Stub::GetNodeInfo, v1::GetNodeInfoRequest(), options_.rpc_timeout);
}

absl::StatusOr<v1::Stats> Client::GetStats() {
  return Call(&v1::Xferd::Stub::GetStats, v1::GetStatsRequest(), options_.rpc_timeout);
}

absl::StatusOr<v1::ListDevicesResponse> Client::ListDevices() {
  return Call(&v1::Xferd::Stub::ListDevices, v1::ListDevicesRequest(), options_.rpc_timeout);
}

absl::StatusOr<v1::ListNodesResponse> Client::ListNodes() {
  return Call(&v1::Xferd::Stub::ListNodes, v1::ListNodesRequest(), options_.rpc_timeout);
}

absl::StatusOr<v1::FindRegionResponse> Client::FindRegion(const std::string& name) {
  v1::FindRegionRequest request;
  request.set_name(name);
  return Call(&v1::Xferd::Stub::FindRegion, request, options_.rpc_timeout);
}

// ------------------------------------------------- reads, blocks, layouts --

absl::StatusOr<v1::Transfer> Client::Read(const v1::ReadRequest& request) {
  v1::WriteRequest bound;  // the same deadline rule as a write
  if (request.has_timeout()) *bound.mutable_timeout() = request.timeout();
  const absl::Duration timeout = WaitingCallTimeout(request.wait(), &bound);
  if (rings_ != nullptr) {
    if (std::optional<RingRequest> r = RingRead(request, default_slice_)) {
      return RingCall(*r, request.wait(), timeout);
    }
  }
  return Call(&v1::Xferd::Stub::Read, request, timeout);
}

absl::StatusOr<v1::Transfer> Client::WriteBlocks(const v1::WriteRequest& request) {
  if (request.ByteSizeLong() <= kMaxMessageBytes || rings_ != nullptr) return Write(request);
  v1::TransferChunk first;
  *first.mutable_write() = request;
  first.mutable_write()->clear_blocks();
  return Stream(std::move(first), request.blocks(), WaitingCallTimeout(request.wait(), &request));
}

absl::StatusOr<v1::Transfer> Client::ReadBlocks(const v1::ReadRequest& request) {
  if (request.ByteSizeLong() <= kMaxMessageBytes || rings_ != nullptr) return Read(request);
  v1::TransferChunk first;
  *first.mutable_read() = request;
  first.mutable_read()->clear_blocks();
  v1::WriteRequest bound;
  if (request.has_timeout()) *bound.mutable_timeout() = request.timeout();
  return Stream(std::move(first), request.blocks(), WaitingCallTimeout(request.wait(), &bound));
}

absl::StatusOr<v1::Transfer> Client::Stream(v1::TransferChunk first, const v1::Blocks& blocks,
                                            absl::Duration timeout) {
  grpc::ClientContext context;
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  v1::Transfer response;
  std::unique_ptr<grpc::ClientWriter<v1::TransferChunk>> writer =
      stub_->SubmitStream(&context, &response);
  const size_t per_chunk = std::max<size_t>(1, kMaxMessageBytes / BytesPerBlock(blocks));
  const size_t count = Count(blocks);
  bool sent = true;
  for (size_t i = 0; sent && i < count; i += per_chunk) {
    v1::Blocks part = Slice(blocks, i, std::min(per_chunk, count - i));
    if (i == 0) {
      v1::Blocks* into = first.has_write() ? first.mutable_write()->mutable_blocks()
                                           : first.mutable_read()->mutable_blocks();
      *into = std::move(part);
      sent = writer->Write(first);
    } else {
      v1::TransferChunk more;
      *more.mutable_more_blocks() = std::move(part);
      sent = writer->Write(more);
    }
  }
  // A failed Write means the daemon ended the call: Finish says why.
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::Layout> Client::PrepareLayout(const v1::PrepareLayoutRequest& request) {
  return Call(&v1::Xferd::Stub::PrepareLayout, request, options_.rpc_timeout);
}

absl::StatusOr<v1::DeleteLayoutResponse> Client::DeleteLayout(const std::string& name) {
  v1::DeleteLayoutRequest request;
  request.set_name(name);
  return Call(&v1::Xferd::Stub::DeleteLayout, request, options_.rpc_timeout);
}

absl::StatusOr<v1::ListLayoutsResponse> Client::ListLayouts() {
  return Call(&v1::Xferd::Stub::ListLayouts, v1::ListLayoutsRequest(), options_.rpc_timeout);
}

}  // namespace xferd::client
