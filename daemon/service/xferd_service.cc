#include "daemon/service/xferd_service.h"

#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/process_stats.h"
#include "daemon/service/blocks_convert.h"
#include "daemon/service/page_token.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/region_watch.h"
#include "daemon/service/status_convert.h"

namespace xferd::service {

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(status));
  return reactor;
}

namespace {

// One page of `items` (any order) by ascending `key`, after the token's key,
// each made a message by `make` and added to `out` while the page has room
// (PageFill); fills next_page_token when more follow. INVALID_ARGUMENT for a
// bad token.
template <typename Request, typename Item, typename KeyFn, typename MakeFn, typename Message>
absl::Status FillPage(absl::string_view list, const Request& request, std::vector<Item> items,
                      KeyFn key, MakeFn make, google::protobuf::RepeatedPtrField<Message>* out,
                      std::string* next_page_token) {
  ASSIGN_OR_RETURN(const std::string start, PageStart(list, request.page_token()));
  std::sort(items.begin(), items.end(),
            [&](const Item& a, const Item& b) { return key(a) < key(b); });
  auto it = start.empty() ? items.begin()
                          : std::upper_bound(items.begin(), items.end(), start,
                                             [&](const std::string& k, const Item& item) {
                                               return k < key(item);
                                             });
  PageFill page(PageSize(request.page_size()));
  for (; it != items.end(); ++it) {
    Message message = make(*it);
    if (!page.Take(message.ByteSizeLong())) break;
    *out->Add() = std::move(message);
  }
  if (it != items.end()) *next_page_token = PageToken(list, key(*(it - 1)));
  return absl::OkStatus();
}

constexpr absl::Duration kDefaultConnectTimeout = absl::Seconds(10);

// A reply lingers only for submissions this small. A larger one's time is
// its data's, so the caller's one more call to wait costs it next to
// nothing, while holding the reply would stall a caller that queues a
// pipeline of large writes (each write() would last as long as its data).
constexpr uint64_t kLingerMaxBytes = 1 << 20;

absl::Duration EffectiveLinger(absl::Duration linger,
                               const std::vector<std::shared_ptr<engine::Transfer>>& transfers) {
  if (linger == absl::InfiniteDuration()) return linger;  // wait: until the end
  uint64_t bytes = 0;
  for (const auto& t : transfers) bytes += t->bytes();
  return bytes <= kLingerMaxBytes ? linger : absl::ZeroDuration();
}
constexpr absl::Duration kDefaultWatchInterval = absl::Milliseconds(100);

template <typename T>
grpc::ServerWriteReactor<T>* FailStream(const absl::Status& status) {
  class Failed final : public grpc::ServerWriteReactor<T> {
   public:
    explicit Failed(const absl::Status& s) { this->Finish(ToGrpc(s)); }
    void OnDone() override { delete this; }
  };
  return new Failed(status);
}

}  // namespace

XferdServiceImpl::XferdServiceImpl(engine::Engine& engine, NodeDescription node)
    : engine_(engine), node_(std::move(node)) {}

// ---------------------------------------------------------------- regions --

grpc::ServerUnaryReactor* XferdServiceImpl::RegisterRegion(grpc::CallbackServerContext* context,
                                                           const v1::RegisterRegionRequest* request,
                                                           v1::Region* response) {
  absl::StatusOr<memory::RegionSpec> spec = FromProto(*request);
  if (!spec.ok()) return Reply(context, spec.status());
  const engine::Tenant& tenant = Caller(*context);
  spec->owner = tenant.name();
  for (const std::string& other : spec->shared_with) {
    if (other != "*" && engine_.tenants().Find(other) == nullptr) {
      return Reply(context,
                   absl::InvalidArgumentError(absl::StrCat(
                       "shared_with names '", other,
                       "', which is no tenant of this daemon: name tenants of its "
                       "[tenants.<name>] (xferctl tenants lists them), or \"*\" for all")));
    }
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  engine_.RegisterRegion(*std::move(spec), [this, &tenant, reactor, response](
                                               absl::StatusOr<std::shared_ptr<memory::Region>> r) {
    if (r.ok()) {
      ToProto(**r, engine_.transport_kind(), response);
    } else {
      tenant.CountRefusal(r.status());
    }
    reactor->Finish(ToGrpc(r.status()));
  });
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::DeregisterRegion(
    grpc::CallbackServerContext* context, const v1::DeregisterRegionRequest* request,
    v1::DeregisterRegionResponse* response) {
  // Replies once the peers that knew the region have forgotten it, so a write
  // the caller lets them start next cannot use its old key.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<uint32_t> removed = engine_.DeregisterRegion(
      request->name(), Caller(*context), request->force(), [reactor, response](uint32_t cancelled) {
        response->set_cancelled_transfers(cancelled);
        reactor->Finish(grpc::Status::OK);
      });
  if (!removed.ok()) reactor->Finish(ToGrpc(removed.status()));
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::SetRegionAcl(grpc::CallbackServerContext* context,
                                                         const v1::SetRegionAclRequest* request,
                                                         v1::Region* response) {
  // Replies once the peers left out have forgotten its keys, so the next
  // write they start resolves again (and is refused).
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  engine_.SetRegionAcl(
      request->name(), Caller(*context),
      {request->allowed_peers().begin(), request->allowed_peers().end()},
      [this, reactor, response](absl::StatusOr<std::shared_ptr<memory::Region>> region) {
        if (region.ok()) ToProto(**region, engine_.transport_kind(), response);
        reactor->Finish(ToGrpc(region.status()));
      });
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListRegions(grpc::CallbackServerContext* context,
                                                        const v1::ListRegionsRequest* request,
                                                        v1::ListRegionsResponse* response) {
  const engine::Tenant& tenant = Caller(*context);
  std::vector<std::shared_ptr<memory::Region>> regions = engine_.ListRegions();
  regions.erase(std::remove_if(regions.begin(), regions.end(),
                               [&](const auto& r) { return !tenant.MayUse(*r); }),
                regions.end());
  return Reply(context, FillPage(
                            "regions", *request, std::move(regions),
                            [](const auto& r) { return r->name(); },
                            [&](const auto& r) {
                              v1::Region message;
                              ToProto(*r, engine_.transport_kind(), &message);
                              return message;
                            },
                            response->mutable_regions(), response->mutable_next_page_token()));
}

grpc::ServerWriteReactor<v1::RegionEvent>* XferdServiceImpl::WatchRegion(
    grpc::CallbackServerContext* context, const v1::WatchRegionRequest* request) {
  absl::StatusOr<std::shared_ptr<memory::Region>> found =
      engine_.FindRegionFor(request->name(), Caller(*context));
  if (!found.ok()) return FailStream<v1::RegionEvent>(found.status());
  std::shared_ptr<memory::Region> region = *std::move(found);
  if (request->ranges() && !region->spec().landed_ranges) {
    return FailStream<v1::RegionEvent>(absl::FailedPreconditionError(absl::StrCat(
        "region '", request->name(),
        "' keeps no landed ranges: register it with landed_ranges to watch them")));
  }
  return new RegionWatchReactor(std::move(region), watch_loop_, request->ranges());
}

// ------------------------------------------------------------------ peers --

grpc::ServerUnaryReactor* XferdServiceImpl::ConnectPeer(grpc::CallbackServerContext* context,
                                                        const v1::ConnectPeerRequest* request,
                                                        v1::Peer* response) {
  absl::Duration timeout = kDefaultConnectTimeout;
  if (request->has_timeout()) {
    absl::StatusOr<absl::Duration> t = FromProto(request->timeout(), "timeout");
    if (!t.ok()) return Reply(context, t.status());
    timeout = *t;
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  engine_.ConnectPeer(request->address(), timeout,
                      [reactor, response](absl::StatusOr<engine::PeerInfo> peer) {
                        if (peer.ok()) ToProto(*peer, response);
                        reactor->Finish(ToGrpc(peer.status()));
                      });
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListPeers(grpc::CallbackServerContext* context,
                                                      const v1::ListPeersRequest* request,
                                                      v1::ListPeersResponse* response) {
  return Reply(context, FillPage(
                            "peers", *request, engine_.ListPeers(),
                            // A node id may show twice (an old incarnation going away).
                            [](const engine::PeerInfo& p) {
                              return absl::StrCat(p.node.node_id, "/", p.node.incarnation);
                            },
                            [](const engine::PeerInfo& p) {
                              v1::Peer message;
                              ToProto(p, &message);
                              return message;
                            },
                            response->mutable_peers(), response->mutable_next_page_token()));
}

grpc::ServerUnaryReactor* XferdServiceImpl::DisconnectPeer(grpc::CallbackServerContext* context,
                                                           const v1::DisconnectPeerRequest* request,
                                                           v1::DisconnectPeerResponse* response) {
  absl::StatusOr<uint32_t> failed = engine_.DisconnectPeer(request->peer(), Caller(*context));
  if (failed.ok()) response->set_failed_transfers(*failed);
  return Reply(context, failed.status());
}

// -------------------------------------------------------------- transfers --

void XferdServiceImpl::SubmitAndReply(
    const engine::Tenant& tenant, std::vector<engine::TransferSpec> writes, bool batch,
    absl::Duration linger, std::function<void(const grpc::Status&)> finish,
    std::function<void(const std::vector<engine::TransferInfo>&)> fill) {
  for (engine::TransferSpec& spec : writes) spec.tenant = &tenant;
  engine_.Submit(std::move(writes), batch,
                 [this, finish = std::move(finish), linger, fill = std::move(fill)](
                     absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>> submitted) {
                   if (!submitted.ok()) {
                     finish(ToGrpc(submitted.status()));
                     return;
                   }
                   const absl::Duration hold = EffectiveLinger(linger, *submitted);
                   if (hold <= absl::ZeroDuration()) {
                     ReplyWith(*submitted, fill, finish);
                   } else {
                     TransferWaiter::Start(watch_loop_, *std::move(submitted), fill, finish,
                                           absl::Now() + hold);
                   }
                 });
}

grpc::ServerUnaryReactor* XferdServiceImpl::SubmitOne(grpc::CallbackServerContext* context,
                                                      absl::StatusOr<Submission> submission,
                                                      v1::Transfer* response) {
  if (!submission.ok()) return Reply(context, submission.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<engine::TransferSpec> specs;
  specs.push_back(std::move(submission->spec));
  SubmitAndReply(Caller(*context), std::move(specs), /*batch=*/false, submission->linger,
                 FinishWith(reactor), FillOne(response));
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::Write(grpc::CallbackServerContext* context,
                                                  const v1::WriteRequest* request,
                                                  v1::Transfer* response) {
  return SubmitOne(context, SubmissionFromProto(*request), response);
}

grpc::ServerUnaryReactor* XferdServiceImpl::Read(grpc::CallbackServerContext* context,
                                                 const v1::ReadRequest* request,
                                                 v1::Transfer* response) {
  return SubmitOne(context, SubmissionFromProto(*request), response);
}

grpc::ServerUnaryReactor* XferdServiceImpl::SubmitBatch(grpc::CallbackServerContext* context,
                                                        const v1::SubmitBatchRequest* request,
                                                        v1::SubmitBatchResponse* response) {
  std::vector<engine::TransferSpec> writes;
  for (int i = 0; i < request->writes_size(); ++i) {
    absl::StatusOr<engine::TransferSpec> spec = FromProto(request->writes(i));
    if (!spec.ok()) {
      return Reply(context,
                   absl::Status(spec.status().code(),
                                absl::StrCat("write #", i, ": ", spec.status().message())));
    }
    writes.push_back(*std::move(spec));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  SubmitAndReply(Caller(*context), std::move(writes), /*batch=*/true,
                 request->wait() ? absl::InfiniteDuration() : absl::ZeroDuration(),
                 FinishWith(reactor), [response](const std::vector<engine::TransferInfo>& infos) {
                   response->set_batch_id(infos.front().batch_id);
                   for (const auto& info : infos) ToProto(info, response->add_transfers());
                 });
  return reactor;
}

grpc::ServerUnaryReactor* XferdServiceImpl::GetTransfer(grpc::CallbackServerContext* context,
                                                        const v1::GetTransferRequest* request,
                                                        v1::Transfer* response) {
  absl::StatusOr<engine::TransferInfo> info = GetOwnTransfer(request->id(), Caller(*context));
  if (info.ok()) ToProto(*info, response);
  return Reply(context, info.status());
}

absl::StatusOr<engine::TransferInfo> XferdServiceImpl::GetOwnTransfer(
    uint64_t id, const engine::Tenant& tenant) const {
  absl::StatusOr<engine::TransferInfo> info = engine_.GetTransfer(id);
  if (info.ok() && !tenant.Owns(info->spec.tenant)) {
    return tenant.Denied(
        absl::StrCat("transfer ", id, " belongs to tenant '",
                     info->spec.tenant != nullptr ? info->spec.tenant->name() : "?",
                     "', not to tenant '", tenant.name(), "'"));
  }
  return info;
}

std::shared_ptr<engine::Transfer> XferdServiceImpl::FindOwnTransfer(
    uint64_t id, const engine::Tenant& tenant) const {
  std::shared_ptr<engine::Transfer> t = engine_.FindTransfer(id);
  return t != nullptr && tenant.Owns(t->plan().spec.tenant) ? t : nullptr;
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListTransfers(grpc::CallbackServerContext* context,
                                                          const v1::ListTransfersRequest* request,
                                                          v1::ListTransfersResponse* response) {
  absl::StatusOr<std::string> start = PageStart("transfers", request->page_token());
  engine::TransferFilter filter;
  if (start.ok() && !start->empty() && !absl::SimpleAtoi(*start, &filter.before_id)) {
    start = absl::InvalidArgumentError("page_token: not a token of this list");
  }
  if (!start.ok()) return Reply(context, start.status());
  filter.include_finished = request->include_finished();
  filter.batch_id = request->batch_id();
  const engine::Tenant& tenant = Caller(*context);
  filter.tenant = tenant.admin() ? nullptr : &tenant;  // an admin sees everyone's
  // One more than the page: whether another page follows.
  const uint32_t page = PageSize(request->page_size() != 0 ? request->page_size()
                                                            : request->limit());
  filter.limit = page + 1;
  const std::vector<engine::TransferInfo> infos = engine_.ListTransfers(filter);
  PageFill fill(page);
  size_t taken = 0;
  for (; taken < infos.size(); ++taken) {
    v1::Transfer message;
    ToProto(infos[taken], &message);
    // A page stays small: checksums come with one transfer's own reply.
    message.clear_checksums();
    if (!fill.Take(message.ByteSizeLong())) break;
    *response->add_transfers() = std::move(message);
  }
  if (taken < infos.size()) {
    *response->mutable_next_page_token() =
        PageToken("transfers", absl::StrCat(infos[taken - 1].id));
  }
  return Reply(context, absl::OkStatus());
}

grpc::ServerWriteReactor<v1::Transfer>* XferdServiceImpl::WatchTransfer(
    grpc::CallbackServerContext* context, const v1::WatchTransferRequest* request) {
  const engine::Tenant& tenant = Caller(*context);
  absl::Duration interval = kDefaultWatchInterval;
  if (request->has_interval()) {
    absl::StatusOr<absl::Duration> i = FromProto(request->interval(), "interval");
    if (!i.ok()) return FailStream<v1::Transfer>(i.status());
    interval = *i;
  }
  if (std::shared_ptr<engine::Transfer> t = FindOwnTransfer(request->id(), tenant)) {
    return new TransferWatchReactor(std::move(t), interval, watch_loop_);
  }
  // Finished and reduced to its snapshot (or unknown, or another's): one
  // terminal message, or the error.
  absl::StatusOr<engine::TransferInfo> info = GetOwnTransfer(request->id(), tenant);
  if (!info.ok()) return FailStream<v1::Transfer>(info.status());
  class Once final : public grpc::ServerWriteReactor<v1::Transfer> {
   public:
    explicit Once(const engine::TransferInfo& info) {
      ToProto(info, &message_);
      StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    v1::Transfer message_;
  };
  return new Once(*info);
}

grpc::ServerUnaryReactor* XferdServiceImpl::WaitTransfer(grpc::CallbackServerContext* context,
                                                         const v1::WaitTransferRequest* request,
                                                         v1::Transfer* response) {
  // The waiter of Write with wait: it replies from the watch thread once the
  // transfer has ended. A client that gives up leaves it to end with the
  // transfer (a bounded lifetime: every transfer ends).
  const engine::Tenant& tenant = Caller(*context);
  if (std::shared_ptr<engine::Transfer> t = FindOwnTransfer(request->id(), tenant)) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    std::vector<std::shared_ptr<engine::Transfer>> one;
    one.push_back(std::move(t));
    TransferWaiter::Start(watch_loop_, std::move(one), FillOne(response), FinishWith(reactor));
    return reactor;
  }
  // Finished and reduced to its snapshot (or unknown, or another's): the
  // snapshot is final.
  absl::StatusOr<engine::TransferInfo> info = GetOwnTransfer(request->id(), tenant);
  if (info.ok()) ToProto(*info, response);
  return Reply(context, info.status());
}

grpc::ServerUnaryReactor* XferdServiceImpl::CancelTransfer(grpc::CallbackServerContext* context,
                                                           const v1::CancelTransferRequest* request,
                                                           v1::Transfer* response) {
  absl::StatusOr<engine::TransferInfo> info = GetOwnTransfer(request->id(), Caller(*context));
  if (info.ok()) info = engine_.CancelTransfer(request->id());
  if (info.ok()) ToProto(*info, response);
  return Reply(context, info.status());
}

// ---------------------------------------------------------- node and stats --

grpc::ServerUnaryReactor* XferdServiceImpl::GetNodeInfo(grpc::CallbackServerContext* context,
                                                        const v1::GetNodeInfoRequest*,
                                                        v1::NodeInfo* response) {
  // Identity and address are fixed once the engine is ready (both are known
  // only after the server bound its port).
  if (engine_.ready()) {
    response->set_node_id(engine_.self().node_id);
    response->set_grpc_address(engine_.self().address);
  }
  response->set_version(node_.version);
  response->set_transport(ToProto(engine_.transport_kind()));
  response->set_device(engine_.transport_device());
  response->set_transport_reason(node_.transport_reason);
  response->set_unix_socket(node_.unix_socket);
  response->set_local_socket(node_.local_socket);
  response->set_pollers(engine_.config().pollers);
  response->set_default_slice_size(engine_.config().slice_size);
  ToProto(node_.started_at, response->mutable_started_at());
  response->set_pid(static_cast<uint32_t>(::getpid()));
  response->set_security(node_.security);
  response->set_tenant(Caller(*context).name());
  FillDirectoryStatus(directory_.load(std::memory_order_acquire), response->mutable_directory());
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* XferdServiceImpl::GetStats(grpc::CallbackServerContext* context,
                                                     const v1::GetStatsRequest*,
                                                     v1::Stats* response) {
  ToProto(engine_.Stats(), ReadProcessStats(), absl::Now() - node_.started_at,
          engine_.transport_kind(), response);
  return Reply(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* XferdServiceImpl::ListDevices(grpc::CallbackServerContext* context,
                                                        const v1::ListDevicesRequest*,
                                                        v1::ListDevicesResponse* response) {
  absl::StatusOr<std::vector<transport::DeviceInfo>> devices = engine_.HostDevices();
  if (devices.ok()) {
    ToProto(*devices, engine_.Stats().transport.devices, engine_.rdma_port(), response);
  }
  return Reply(context, devices.status());
}

}  // namespace xferd::service
