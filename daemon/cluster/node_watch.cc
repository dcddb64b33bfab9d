#include "daemon/cluster/node_watch.h"

#include <pthread.h>

#include <algorithm>
#include <utility>

#include "daemon/cluster/records.h"
#include "daemon/common/log.h"

namespace xferd::cluster {
namespace {

// Between a failed stream and the next: etcd down must not spin a core.
constexpr absl::Duration kRetryInterval = absl::Milliseconds(500);

}  // namespace

NodeWatch::NodeWatch(EtcdClient& etcd, std::string prefix, OnGone on_gone)
    : etcd_(etcd), prefix_(std::move(prefix)), on_gone_(std::move(on_gone)) {
  thread_ = std::thread([this] { Run(); });
}

NodeWatch::~NodeWatch() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  thread_.join();
}

int64_t NodeWatch::next_revision() const {
  MutexLock lock(&mu_);
  return next_revision_;
}

void NodeWatch::Run() {
  pthread_setname_np(pthread_self(), "xferd-node-watch");
  for (;;) {
    WatchOnce();
    MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
                             kRetryInterval)) {
      return;
    }
  }
}

void NodeWatch::WatchOnce() {
  grpc::ClientContext context;
  etcdserverpb::WatchRequest request;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    context_ = &context;
    etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(NodesPrefix(prefix_));
    create->set_range_end(RangeEnd(NodesPrefix(prefix_)));
    create->set_start_revision(next_revision_);  // 0: from now
    create->set_prev_kv(true);                   // a delete then carries the record
  }
  auto stream = etcd_.WatchStub().Watch(&context);
  etcdserverpb::WatchResponse response;
  if (stream->Write(request)) {
    while (stream->Read(&response)) {
      if (response.compact_revision() > 0) {
        spdlog::warn(
            "cluster directory: etcd compacted revisions up to {} before the node watch "
            "read them; departures in between are noticed by their lanes instead",
            response.compact_revision());
        MutexLock lock(&mu_);
        next_revision_ = 0;
        break;
      }
      if (response.canceled()) break;
      // The created answer's header revision is where a watch "from now"
      // starts; later, events say how far it got (replayed batches carry
      // the store's current revision in their header, not theirs).
      int64_t next = 0;
      if (response.created()) next = response.header().revision() + 1;
      for (const mvccpb::Event& event : response.events()) {
        next = std::max(next, event.kv().mod_revision() + 1);
        if (event.type() != mvccpb::Event::DELETE || !event.has_prev_kv()) continue;
        absl::StatusOr<v1::DirectoryNode> gone =
            DecodeNode(event.prev_kv().key(), event.prev_kv().value());
        if (gone.ok()) on_gone_(*gone);
      }
      MutexLock lock(&mu_);
      if (!response.created() || next_revision_ == 0) {
        next_revision_ = std::max(next_revision_, next);
      }
    }
  }
  context.TryCancel();
  const grpc::Status status = stream->Finish();
  MutexLock lock(&mu_);
  context_ = nullptr;
  if (!stopping_) {
    spdlog::debug("cluster directory: node watch ended ({}); opening it again from revision {}",
                  status.error_message(), next_revision_);
  }
}

}  // namespace xferd::cluster
