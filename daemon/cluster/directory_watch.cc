#include "daemon/cluster/directory_watch.h"

#include <pthread.h>

#include <utility>
#include <vector>

#include "daemon/base/status_macros.h"
#include "daemon/cluster/records.h"
#include "daemon/common/log.h"

namespace xferd::cluster {
namespace {

// Between a failed stream and the next: etcd down must not spin a core.
constexpr absl::Duration kRetryInterval = absl::Milliseconds(500);
// A full read of the directory (1,000 nodes and 10,000 regions are ~3 MB).
constexpr absl::Duration kReadTimeout = absl::Seconds(5);

}  // namespace

absl::StatusOr<etcdserverpb::TxnResponse> ReadDirectory(EtcdClient& etcd, const std::string& prefix,
                                                        absl::Duration timeout) {
  etcdserverpb::TxnRequest txn;
  for (const std::string& p : {NodesPrefix(prefix), RegionsPrefix(prefix)}) {
    etcdserverpb::RangeRequest* range = txn.add_success()->mutable_request_range();
    range->set_key(p);
    range->set_range_end(RangeEnd(p));
  }
  return etcd.Txn(txn, timeout);
}

DirectoryWatch::DirectoryWatch(EtcdClient& etcd, std::string prefix, DirectoryCache& cache,
                               OnGone on_gone)
    : etcd_(etcd), prefix_(std::move(prefix)), cache_(cache), on_gone_(std::move(on_gone)) {}

DirectoryWatch::~DirectoryWatch() { Stop(); }

void DirectoryWatch::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status DirectoryWatch::Start() {
  RETURN_IF_ERROR(Load());
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

bool DirectoryWatch::live() const {
  MutexLock lock(&mu_);
  return live_;
}

int64_t DirectoryWatch::relists() const {
  MutexLock lock(&mu_);
  return relists_;
}

absl::Status DirectoryWatch::Load() {
  ASSIGN_OR_RETURN(etcdserverpb::TxnResponse read, ReadDirectory(etcd_, prefix_, kReadTimeout));
  const std::vector<v1::DirectoryNode> gone =
      cache_.Reset(read.responses(0).response_range().kvs(),
                   read.responses(1).response_range().kvs(), read.header().revision());
  for (const v1::DirectoryNode& node : gone) on_gone_(node);
  MutexLock lock(&mu_);
  reload_ = false;
  return absl::OkStatus();
}

void DirectoryWatch::Run() {
  pthread_setname_np(pthread_self(), "xferd-dir-watch");
  for (;;) {
    bool reload;
    {
      MutexLock lock(&mu_);
      reload = reload_;
    }
    absl::Status loaded = reload ? Load() : absl::OkStatus();
    if (loaded.ok()) {
      if (reload) {
        MutexLock lock(&mu_);
        ++relists_;
        spdlog::info("cluster directory: read again at revision {} after a compaction",
                     cache_.revision());
      }
      WatchOnce();
    }
    MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; },
                             kRetryInterval)) {
      return;
    }
  }
}

void DirectoryWatch::WatchOnce() {
  grpc::ClientContext context;
  etcdserverpb::WatchRequest request;
  const int64_t from = cache_.revision() + 1;
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    context_ = &context;
    etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(prefix_);
    create->set_range_end(RangeEnd(prefix_));
    create->set_start_revision(from);
  }
  auto stream = etcd_.WatchStub().Watch(&context);
  etcdserverpb::WatchResponse response;
  if (stream->Write(request)) {
    while (stream->Read(&response)) {
      if (response.compact_revision() > 0) {
        spdlog::warn(
            "cluster directory: etcd compacted revisions up to {} before the watch read them "
            "(it resumed from {}): reading the whole directory again",
            response.compact_revision(), from);
        MutexLock lock(&mu_);
        reload_ = true;
        break;
      }
      if (response.canceled()) break;
      if (response.created()) {
        spdlog::debug("cluster directory: watching {} from revision {}", prefix_, from);
        MutexLock lock(&mu_);
        live_ = true;
      }
      for (const mvccpb::Event& event : response.events()) {
        std::optional<v1::DirectoryNode> gone = cache_.Apply(event);
        if (gone.has_value()) on_gone_(*gone);
      }
    }
  }
  context.TryCancel();
  const grpc::Status status = stream->Finish();
  MutexLock lock(&mu_);
  context_ = nullptr;
  const bool was_live = live_;
  live_ = false;
  // Once per outage, not at every retry while etcd is away.
  if (!stopping_ && was_live) {
    spdlog::info("cluster directory: watch ended ({}); opening it again from revision {}",
                 status.error_message(), cache_.revision() + 1);
  }
}

}  // namespace xferd::cluster
