#include "daemon/cluster/directory.h"

#include <pthread.h>

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/cluster/records.h"
#include "daemon/common/log.h"

namespace xferd::cluster {
namespace {

// Each call to etcd; the keep-alive loop retries after a failure.
constexpr absl::Duration kCallTimeout = absl::Seconds(3);
// While etcd does not answer: how often the thread tries again.
constexpr absl::Duration kRetryInterval = absl::Milliseconds(500);

v1::RegionBacking BackingOf(memory::Backing backing) {
  switch (backing) {
    case memory::Backing::kAnonymous:
      return v1::REGION_BACKING_ANONYMOUS;
    case memory::Backing::kShm:
      return v1::REGION_BACKING_SHM;
    case memory::Backing::kFile:
      return v1::REGION_BACKING_FILE;
  }
  return v1::REGION_BACKING_UNSPECIFIED;
}

// A region's public description: never its address, keys or token.
v1::DirectoryRegion Describe(const std::string& node_id, const memory::Region& region) {
  v1::DirectoryRegion record;
  record.set_node_id(node_id);
  record.set_name(region.name());
  record.set_size(region.size());
  record.set_backing(BackingOf(region.spec().backing));
  record.mutable_access()->set_remote_write(region.access().remote_write);
  record.mutable_access()->set_remote_read(region.access().remote_read);
  for (const std::string& peer : region.allowed_peers()) record.add_allowed_peers(peer);
  record.set_tenant(region.spec().owner);
  for (const std::string& tenant : region.spec().shared_with) record.add_shared_with(tenant);
  return record;
}

void AddPut(etcdserverpb::TxnRequest& txn, std::string key, std::string value, int64_t lease) {
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(std::move(key));
  put->set_value(std::move(value));
  put->set_lease(lease);
}

void AddDelete(etcdserverpb::TxnRequest& txn, std::string key, bool prefix) {
  etcdserverpb::DeleteRangeRequest* del = txn.add_success()->mutable_request_delete_range();
  if (prefix) del->set_range_end(RangeEnd(key));
  del->set_key(std::move(key));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Directory>> Directory::Join(const ClusterConfig& config,
                                                           v1::DirectoryNode self,
                                                           engine::Engine& engine) {
  RETURN_IF_ERROR(CheckNodeId(self.node_id()));
  ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd, EtcdClient::Create(config));
  std::unique_ptr<Directory> directory(
      new Directory(config, std::move(self), engine, std::move(etcd)));
  RETURN_IF_ERROR(directory->Claim());
  RETURN_IF_ERROR(directory->SyncRegions());
  directory->SetState(absl::OkStatus());
  directory->watch_ = std::make_unique<DirectoryWatch>(
      *directory->etcd_, config.prefix, directory->cache_,
      [d = directory.get()](const v1::DirectoryNode& gone) {
        if (gone.node_id() == d->self_.node_id()) return;
        // The engine fails the peer's transfers UNAVAILABLE with this reason,
        // and the next write to it looks it up again.
        (void)d->engine_.OnGoodbye(gone.node_id(), gone.incarnation(),
                                   "it left the cluster directory (it stopped, or its etcd lease "
                                   "expired: it crashed, hung or lost etcd)");
      });
  // The cache is full before the first lookup can reach it.
  if (absl::Status started = directory->watch_->Start(); !started.ok()) {
    directory->Leave(absl::Now() + kCallTimeout);
    return started;
  }
  engine.SetRegionObserver(directory.get());
  engine.SetNodeDirectory(directory.get());
  directory->thread_ = std::thread([d = directory.get()] { d->Run(); });
  return directory;
}

Directory::Directory(const ClusterConfig& config, v1::DirectoryNode self, engine::Engine& engine,
                     std::unique_ptr<EtcdClient> etcd)
    : config_(config),
      self_(std::move(self)),
      engine_(engine),
      etcd_(std::move(etcd)),
      cache_(config.prefix) {}

Directory::~Directory() {
  if (watch_ != nullptr) watch_->Stop();
  engine_.SetRegionObserver(nullptr);
  engine_.SetNodeDirectory(nullptr);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

absl::Status Directory::Claim() {
  ASSIGN_OR_RETURN(lease_, etcd_->GrantLease(config_.lease_ttl, kCallTimeout));
  self_.set_lease(lease_);
  const std::string key = NodeKey(config_.prefix, self_.node_id());
  // Put only if no live daemon holds the key (create_revision 0: absent);
  // else read who does, for the message. One transaction: no race.
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* absent = txn.add_compare();
  absent->set_key(key);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);
  AddPut(txn, key, Encode(self_), lease_);
  txn.add_failure()->mutable_request_range()->set_key(key);
  ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, etcd_->Txn(txn, kCallTimeout));
  published_.clear();
  if (response.succeeded()) {
    spdlog::info("cluster directory: joined as {} at etcd {} (key {}, lease {:x}, ttl {})",
                 self_.node_id(), etcd_->endpoints(), key, lease_,
                 absl::FormatDuration(config_.lease_ttl));
    return absl::OkStatus();
  }
  const int64_t lost_lease = lease_;
  lease_ = 0;
  etcd_->RevokeLease(lost_lease, kCallTimeout).IgnoreError();
  std::string holder = "another daemon";
  const auto& kvs = response.responses(0).response_range().kvs();
  if (!kvs.empty()) {
    absl::StatusOr<v1::DirectoryNode> other = DecodeNode(key, kvs[0].value());
    if (other.ok()) holder = absl::StrCat("a live daemon at ", other->address());
  }
  return absl::AlreadyExistsError(
      absl::StrCat("node id '", self_.node_id(), "' is already taken in the cluster directory by ",
                   holder, " (etcd key ", key,
                   ", under its lease): stop that daemon, or give this one another "
                   "node_id"));
}

absl::Status Directory::SyncRegions() {
  std::map<std::string, std::string> wanted;
  for (const std::shared_ptr<memory::Region>& region : engine_.ListRegions()) {
    wanted[region->name()] = Encode(Describe(self_.node_id(), *region));
  }
  etcdserverpb::TxnRequest txn;
  for (const auto& [name, value] : wanted) {
    auto it = published_.find(name);
    if (it == published_.end() || it->second != value) {
      AddPut(txn, RegionKey(config_.prefix, self_.node_id(), name), value, lease_);
    }
  }
  for (const auto& [name, value] : published_) {
    if (!wanted.count(name))
      AddDelete(txn, RegionKey(config_.prefix, self_.node_id(), name), false);
  }
  if (txn.success_size() == 0) return absl::OkStatus();
  RETURN_IF_ERROR(etcd_->Txn(txn, kCallTimeout).status());
  published_ = std::move(wanted);
  return absl::OkStatus();
}

void Directory::Run() {
  pthread_setname_np(pthread_self(), "xferd-directory");
  // etcd's own clients keep alive at a third of the TTL: two may be lost.
  const absl::Duration interval = config_.lease_ttl / 3;
  absl::Time next_keepalive = absl::Now() + interval;
  for (;;) {
    bool dirty;
    {
      MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(
          [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || regions_dirty_; },
          next_keepalive);
      if (stopping_) return;
      dirty = regions_dirty_;
      regions_dirty_ = false;
    }
    absl::Status status = absl::OkStatus();
    if (lease_ == 0) {
      status = Claim();  // after an outage: a new lease, everything again
      dirty = true;
    } else if (absl::Now() >= next_keepalive) {
      absl::StatusOr<int64_t> ttl = etcd_->KeepAlive(lease_, kCallTimeout);
      status = ttl.status();
      if (ttl.ok() && *ttl <= 0) {
        spdlog::warn(
            "cluster directory: lease {:x} expired (etcd was out of reach for longer "
            "than cluster.lease_ttl): joining again under a new one",
            lease_);
        lease_ = 0;
        status = absl::UnavailableError("the lease expired; joining again");
      }
    }
    if (status.ok() && dirty) status = SyncRegions();
    if (!status.ok()) {
      MutexLock lock(&mu_);
      regions_dirty_ = regions_dirty_ || dirty;
    }
    SetState(status);
    next_keepalive = absl::Now() + (status.ok() ? interval : kRetryInterval);
  }
}

void Directory::SetState(const absl::Status& status) {
  MutexLock lock(&mu_);
  if (status.ok() != state_.connected) {
    if (status.ok()) {
      spdlog::info("cluster directory: connected to etcd {}", etcd_->endpoints());
    } else {
      spdlog::warn("cluster directory: {}", status.message());
    }
  }
  state_.connected = status.ok();
  state_.error = status.ok() ? "" : std::string(status.message());
}

void Directory::OnRegionsChanged() {
  MutexLock lock(&mu_);
  regions_dirty_ = true;
}

void Directory::Leave(absl::Time deadline) {
  watch_->Stop();
  engine_.SetRegionObserver(nullptr);
  engine_.SetNodeDirectory(nullptr);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  if (lease_ == 0) return;
  etcdserverpb::TxnRequest txn;
  AddDelete(txn, NodeKey(config_.prefix, self_.node_id()), false);
  AddDelete(txn, NodeRegionsPrefix(config_.prefix, self_.node_id()), true);
  absl::Status status =
      etcd_->Txn(txn, std::max(deadline - absl::Now(), absl::Milliseconds(1))).status();
  if (status.ok()) {
    etcd_->RevokeLease(lease_, std::max(deadline - absl::Now(), absl::Milliseconds(1)))
        .IgnoreError();
    spdlog::info("cluster directory: left (keys of {} deleted)", self_.node_id());
  } else {
    spdlog::warn(
        "cluster directory: could not delete this daemon's keys ({}); they expire with "
        "lease {:x} within cluster.lease_ttl",
        status.message(), lease_);
  }
  lease_ = 0;
}

DirectoryListing Directory::Listing() const { return cache_.Listing(); }

bool Directory::current() const { return watch_ != nullptr && watch_->live() && state().connected; }

void Directory::FindRegionAsync(std::string name, std::function<void(FoundRegions)> done) const {
  std::vector<v1::DirectoryRegion> cached = cache_.FindRegion(name);
  if (!cached.empty()) return done(std::move(cached));
  lookups_.Run([this, name = std::move(name), done = std::move(done)] {
    absl::StatusOr<etcdserverpb::TxnResponse> read =
        ReadDirectory(*etcd_, config_.prefix, kCallTimeout);
    if (!read.ok()) return done(read.status());
    DirectoryCache fresh(config_.prefix);
    fresh.Reset(read->responses(0).response_range().kvs(),
                read->responses(1).response_range().kvs(), read->header().revision());
    done(fresh.FindRegion(name));
  });
}

absl::StatusOr<std::string> Directory::AddressOf(const std::string& node_id, absl::Time deadline) {
  if (!CheckNodeId(node_id).ok()) {
    return absl::NotFoundError(absl::StrCat("'", node_id, "' is not a node id"));
  }
  if (std::optional<v1::DirectoryNode> cached = cache_.Node(node_id)) return cached->address();
  const std::string key = NodeKey(config_.prefix, node_id);
  etcdserverpb::RangeRequest range;
  range.set_key(key);
  const absl::Duration timeout =
      std::max(std::min(deadline - absl::Now(), kCallTimeout), absl::Milliseconds(1));
  ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, etcd_->Range(range, timeout));
  if (response.kvs().empty()) {
    return absl::NotFoundError(absl::StrCat("no live daemon '", node_id,
                                            "' is in the cluster directory (etcd key ", key,
                                            "): it is not running, or has left"));
  }
  ASSIGN_OR_RETURN(v1::DirectoryNode node, DecodeNode(key, response.kvs(0).value()));
  return node.address();
}

DirectoryState Directory::state() const {
  DirectoryState state;
  {
    MutexLock lock(&mu_);
    state = state_;
  }
  state.revision = cache_.revision();
  if (watch_ != nullptr) {
    state.watching = watch_->live();
    state.relists = watch_->relists();
  }
  return state;
}

}  // namespace xferd::cluster
