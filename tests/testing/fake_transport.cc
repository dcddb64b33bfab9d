#include "tests/testing/fake_transport.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"
#include "daemon/common/unique_fd.h"

namespace xferd::testing {
namespace {

class FakeLane final : public transport::Lane {
 public:
  FakeLane(FakeLink& link, FakeTransport::Worker& worker, uint32_t depth)
      : link_(link), worker_(worker), depth_(depth) {}
  uint32_t credits() const override;
  bool broken() const override;
  uint32_t Post(absl::Span<const transport::DataOp> ops) override;

  FakeLink& link() const { return link_; }
  FakeTransport::Worker& worker() const { return worker_; }
  uint32_t in_flight = 0;  // poller thread only

 private:
  FakeLink& link_;
  FakeTransport::Worker& worker_;
  const uint32_t depth_;
};

// TCP's registration carries no keys either.
class FakeRegistration final : public memory::TransportRegistration {
 public:
  explicit FakeRegistration(std::shared_ptr<std::atomic<uint32_t>> count)
      : count_(std::move(count)) {
    count_->fetch_add(1);
  }
  ~FakeRegistration() override { count_->fetch_sub(1); }

 private:
  const std::shared_ptr<std::atomic<uint32_t>> count_;
};

}  // namespace

// One end of a link. The responder's end waits in the fabric until the
// initiator's Connect pairs the two; from then on each end receives what the
// other posts, and closing either breaks both.
class FakeLink final : public transport::Link,
                       public transport::LinkRejoin,
                       public std::enable_shared_from_this<FakeLink> {
 public:
  // Lane i posts to workers[i].
  FakeLink(FakeFabric& fabric, const memory::RegionRegistry& regions, FakeRejoins& rejoins,
           transport::PeerIdentity peer, const std::vector<FakeTransport::Worker*>& workers,
           uint32_t depth)
      : Link(std::move(peer)), fabric_(fabric), regions_(regions), rejoins_(rejoins) {
    for (FakeTransport::Worker* worker : workers) {
      lanes_.push_back(std::make_unique<FakeLane>(*this, *worker, depth));
    }
  }
  ~FakeLink() override { Close(absl::UnavailableError("the link was dropped")); }

  absl::Status Connect(const transport::PeerIdentity& peer, const transport::LinkEndpoints& remote,
                       absl::Time) override {
    set_peer(peer);
    if (remote.kind != transport::TransportKind::kTcp || remote.tcp.session_token.empty()) {
      return Fail(absl::InvalidArgumentError("peer sent no usable TCP data endpoint"));
    }
    if (remote.lanes == 0 || remote.lanes > lanes_.size()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(
          "peer answered with ", remote.lanes, " lanes; this daemon offered ", lanes_.size())));
    }
    std::shared_ptr<FakeLink> other = fabric_.Take(remote.tcp.session_token);
    if (other == nullptr || other->broken()) {
      return Fail(absl::UnavailableError("peer refused the data connection"));
    }
    lanes_.resize(remote.lanes);  // nothing uses the link before Connect returns
    PairWith(other);
    other->PairWith(shared_from_this());
    // Closed between Take and the pairing, it could not tell this end.
    if (other->broken()) return Fail(other->status());
    return absl::OkStatus();
  }

  void Close(absl::Status reason) override {
    if (!MarkBroken(std::move(reason))) return;
    WakeWorkers();  // its held ops complete now, failed
    if (std::shared_ptr<FakeLink> other = this->other()) {
      // What a TCP peer sees when the connection ends.
      other->Close(absl::UnavailableError(
          absl::StrCat("the peer closed the data connection (", status().message(), ")")));
    }
  }

  transport::LinkRejoin* rejoin() override { return this; }
  // Wakes the pollers of its lanes (defined after Worker).
  void WakeWorkers();

  // The rejoin steps on the one modelled pair (device 0 on both ends).
  bool OfferRejoin(transport::LinkEndpoints* offer) override {
    *offer = transport::LinkEndpoints{transport::TransportKind::kTcp, lane_count()};
    if (!rejoins_.broken.load()) return false;
    offer->devices.push_back(transport::DeviceEndpoints{"fake0"});
    rejoins_.offers.fetch_add(1);
    return true;
  }
  absl::Status AcceptRejoin(const transport::LinkEndpoints& offer, bool,
                            transport::LinkEndpoints* answer) override {
    *answer = offer;
    rejoins_.accepts.fetch_add(static_cast<uint32_t>(offer.devices.size()));
    return absl::OkStatus();
  }
  std::vector<uint32_t> ConnectRejoin(const transport::LinkEndpoints& answer) override {
    if (answer.devices.empty()) return {};
    rejoins_.broken.store(false);
    rejoins_.rejoined.fetch_add(1);
    return {0};
  }
  void CommitRejoin(const std::vector<uint32_t>& devices) override {
    rejoins_.commits.fetch_add(static_cast<uint32_t>(devices.size()));
  }

  uint32_t lane_count() const override { return static_cast<uint32_t>(lanes_.size()); }
  transport::Lane& lane(uint32_t index) override { return *lanes_.at(index); }
  bool ready() const override { return connected() && !broken(); }
  bool connected() const { return connected_.load(std::memory_order_acquire); }

  std::shared_ptr<FakeLink> other() const {
    MutexLock lock(&mu_);
    return other_.lock();
  }

  // Receiver side: what a TCP lane checks before it places an inbound write
  // or serves a read (the region, the ACL, the access, every block's range),
  // then the bytes, then the landed event of a final write. Called on the
  // initiator's poller thread.
  absl::Status Receive(const transport::DataOp& op) {
    const bool write = op.kind == transport::OpKind::kWrite;
    std::shared_ptr<memory::Region> region = regions_.FindById(op.remote->region_id);
    absl::Status verdict = Check(region.get(), op);
    if (!verdict.ok()) {
      counters().writes_rejected.fetch_add(1);
      return verdict;
    }
    for (uint32_t i = 0; i < op.block_count; ++i) {
      const transport::Block& b = op.blocks[i];
      std::byte* remote = region->data() + b.remote_offset;
      std::byte* local = op.local_base + b.local_offset;
      if (write) {
        std::memcpy(remote, local, b.length);
      } else {
        std::memcpy(local, remote, b.length);
      }
    }
    // As TCP counts them: the data this end took in or served.
    (write ? counters().bytes_received : counters().bytes_sent).fetch_add(op.length);
    if (op.notice != nullptr) Land(std::move(region), *op.notice);
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(absl::Status status) {
    Close(status);
    return status;
  }

  void PairWith(const std::shared_ptr<FakeLink>& other) {
    {
      MutexLock lock(&mu_);
      other_ = other;
    }
    connected_.store(true, std::memory_order_release);
  }

  absl::Status Check(const memory::Region* region, const transport::DataOp& op) const {
    const bool write = op.kind == transport::OpKind::kWrite;
    if (region == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("region id ", op.remote->region_id, " is not registered"));
    }
    if (!region->PeerAllowed(peer().node_id)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "node '", peer().node_id, "' is not in the ACL of region '", region->name(), "'"));
    }
    if (write ? !region->access().remote_write : !region->access().remote_read) {
      return absl::PermissionDeniedError(absl::StrCat("region '", region->name(),
                                                      "' does not allow remote ",
                                                      write ? "writes" : "reads"));
    }
    for (uint32_t i = 0; i < op.block_count; ++i) {
      const transport::Block& b = op.blocks[i];
      absl::Status range =
          region->CheckRange(b.remote_offset, b.length, write ? "destination" : "source");
      if (!range.ok()) return range;
    }
    return absl::OkStatus();
  }

  // Writes of one lane are placed in order and the engine posts a final slice
  // only once the others are acknowledged: the whole range has landed. (The
  // fake delivers on the writer's poller, so it announces the landing itself.)
  void Land(std::shared_ptr<memory::Region> region, const transport::LandingNotice& notice) {
    if (!region->CheckRange(notice.offset, notice.length, "landed").ok()) {
      counters().writes_rejected.fetch_add(1);
      return;
    }
    transport::PublishLanding(
        transport::Landing{std::move(region), peer_name(), notice, absl::Now()});
  }

  FakeFabric& fabric_;
  const memory::RegionRegistry& regions_;
  FakeRejoins& rejoins_;  // the transport's
  std::vector<std::unique_ptr<FakeLane>> lanes_;
  std::atomic<bool> connected_{false};
  mutable Mutex mu_;
  std::weak_ptr<FakeLink> other_ ABSL_GUARDED_BY(mu_);
};

namespace {

uint32_t FakeLane::credits() const {
  return link_.connected() && !link_.broken() ? depth_ - in_flight : 0;
}

bool FakeLane::broken() const { return link_.broken(); }

}  // namespace

class FakeTransport::Worker final : public transport::TransportWorker {
 public:
  explicit Worker(FakeTransport& owner)
      : owner_(owner), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  std::vector<uint32_t> preferred_cpus() const override { return owner_.preferred_cpus(); }

  // Takes what `fake` has credits for, in order.
  uint32_t Enqueue(FakeLane& fake, absl::Span<const transport::DataOp> ops) {
    const uint32_t n = std::min<uint32_t>(fake.credits(), static_cast<uint32_t>(ops.size()));
    for (uint32_t i = 0; i < n; ++i) {
      pending_.push_back({fake.link().shared_from_this(), &fake, ops[i]});
      owner_.Record(ops[i]);
    }
    fake.in_flight += n;
    return n;
  }

  // Delivers and completes posted writes in order; a held write stops the
  // queue unless its link broke, which fails it with the link's status.
  uint32_t Poll(transport::CompletionSink& sink) override {
    if (woken_.exchange(false)) {  // this pass serves the wake; no syscall otherwise
      uint64_t count;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    uint32_t handled = 0;
    while (!pending_.empty()) {
      Pending& next = pending_.front();
      if (owner_.held() && !next.lane->broken()) break;
      const Pending p = std::move(next);
      pending_.pop_front();
      --p.lane->in_flight;
      const absl::Status status = Deliver(*p.link, p.op);
      if (status.ok()) {
        transport::LinkCounters& counters = p.link->counters();
        const bool read = p.op.kind == transport::OpKind::kRead;
        (read ? counters.bytes_received : counters.bytes_sent).fetch_add(p.op.length);
      }
      sink.OnOpDone({p.op.cookie, p.op.length, status.ok() ? nullptr : &status});
      ++handled;
    }
    return handled;
  }

  int wait_fd() const override { return wake_.get(); }
  // Asleep while nothing can complete: nothing pending, or the oldest held
  // (HoldCompletions and a broken link wake it, as a NIC's event would).
  bool PrepareToSleep() override {
    return pending_.empty() || (owner_.held() && !pending_.front().lane->broken());
  }
  // Any thread.
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof(one));
    woken_.store(true);  // after the write: a pass that sees it can drain it
  }

 private:
  struct Pending {
    std::shared_ptr<FakeLink> link;  // keeps the lane alive until its completion
    FakeLane* lane;
    transport::DataOp op;
  };

  static absl::Status Deliver(FakeLink& link, const transport::DataOp& op) {
    if (link.broken()) return link.status();
    std::shared_ptr<FakeLink> receiver = link.other();
    // Its end closes ours when it goes; this only covers the moment between.
    if (receiver == nullptr) return absl::UnavailableError("the peer's end of the link is gone");
    return receiver->Receive(op);
  }

  FakeTransport& owner_;
  UniqueFd wake_;  // signalled when held ops may complete (Wake)
  std::atomic<bool> woken_{false};  // wake_ may be readable
  std::deque<Pending> pending_;
};

void FakeLink::WakeWorkers() {
  for (const auto& lane : lanes_) lane->worker().Wake();
}

uint32_t FakeLane::Post(absl::Span<const transport::DataOp> ops) {
  return worker_.Enqueue(*this, ops);
}

std::string FakeFabric::Offer(const std::shared_ptr<FakeLink>& link) {
  MutexLock lock(&mu_);
  std::string token = absl::StrCat("fake-", next_token_++);
  offered_[token] = link;
  return token;
}

std::shared_ptr<FakeLink> FakeFabric::Take(const std::string& token) {
  MutexLock lock(&mu_);
  auto it = offered_.find(token);
  if (it == offered_.end()) return nullptr;
  std::shared_ptr<FakeLink> link = it->second.lock();
  offered_.erase(it);
  return link;
}

FakeTransport::FakeTransport(FakeFabric& fabric, const memory::RegionRegistry& regions,
                             uint32_t pollers, uint32_t depth,
                             transport::TransportKind reported_kind)
    : reported_kind_(reported_kind),
      fabric_(fabric),
      regions_(regions),
      pollers_(pollers),
      depth_(depth),
      registrations_(std::make_shared<std::atomic<uint32_t>>(0)) {
  for (uint32_t i = 0; i < pollers; ++i) workers_.push_back(std::make_unique<Worker>(*this));
}

FakeTransport::~FakeTransport() { Shutdown(); }

transport::TransportWorker& FakeTransport::worker(uint32_t index) { return *workers_.at(index); }

std::shared_ptr<FakeLink> FakeTransport::NewLink(transport::PeerIdentity peer, uint32_t lanes) {
  std::vector<Worker*> workers;
  for (uint32_t i = 0; i < lanes; ++i) workers.push_back(workers_.at(i).get());
  auto link =
      std::make_shared<FakeLink>(fabric_, regions_, rejoins_, std::move(peer), workers, depth_);
  MutexLock lock(&mu_);
  links_.erase(std::remove_if(links_.begin(), links_.end(),
                              [](const std::weak_ptr<FakeLink>& l) { return l.expired(); }),
               links_.end());
  links_.push_back(link);
  return link;
}

absl::StatusOr<std::shared_ptr<transport::Link>> FakeTransport::CreateLink(
    transport::LinkEndpoints* local) {
  {
    MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("daemon is shutting down");
  }
  local->kind = transport::TransportKind::kTcp;
  local->lanes = pollers_;
  // The lane count is settled by the responder's answer (Connect).
  return std::shared_ptr<transport::Link>(NewLink(transport::PeerIdentity{}, pollers_));
}

absl::StatusOr<std::shared_ptr<transport::Link>> FakeTransport::AcceptLink(
    const transport::PeerIdentity& peer, const transport::LinkEndpoints& remote,
    transport::LinkEndpoints* local) {
  if (remote.kind != transport::TransportKind::kTcp) {
    return absl::FailedPreconditionError(
        absl::StrCat("peer ", peer.node_id, " uses the ", TransportKindName(remote.kind),
                     " transport but this daemon uses tcp: configure the same transport on both"));
  }
  if (remote.lanes == 0) return absl::InvalidArgumentError("peer offered 0 lanes");
  {
    MutexLock lock(&mu_);
    if (shut_down_) return absl::UnavailableError("daemon is shutting down");
  }
  std::shared_ptr<FakeLink> link = NewLink(peer, std::min(pollers_, remote.lanes));
  local->kind = transport::TransportKind::kTcp;
  local->lanes = link->lane_count();
  local->tcp = transport::TcpEndpoint{"fake", 1, fabric_.Offer(link)};
  return std::shared_ptr<transport::Link>(std::move(link));
}

absl::StatusOr<transport::RemoteRegion> FakeTransport::GrantRegion(transport::Link&,
                                                                    const memory::Region& region,
                                                                    absl::Time) {
  return transport::RemoteRegion{region.id(), region.size(), 0, 0, {}};
}

transport::TransportStats FakeTransport::stats() const {
  transport::TransportStats stats;
  stats.memory_registrations = registrations_->load();
  MutexLock lock(&mu_);
  for (const auto& weak : links_) {
    std::shared_ptr<FakeLink> link = weak.lock();
    if (link != nullptr && link->ready()) stats.lanes += link->lane_count();
  }
  return stats;
}

absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> FakeTransport::RegisterMemory(
    const memory::Region&) {
  return std::make_unique<FakeRegistration>(registrations_);
}

void FakeTransport::Shutdown() {
  std::vector<std::shared_ptr<FakeLink>> links;
  {
    MutexLock lock(&mu_);
    shut_down_ = true;
    for (auto& weak : links_) {
      if (auto link = weak.lock()) links.push_back(std::move(link));
    }
    links_.clear();
  }
  for (auto& link : links) link->Close(absl::UnavailableError("daemon is shutting down"));
}

void FakeTransport::HoldCompletions(bool hold) {
  hold_.store(hold);
  if (!hold) {
    for (const auto& worker : workers_) worker->Wake();
  }
}

void FakeTransport::CloseLinks(const absl::Status& reason) {
  std::vector<std::shared_ptr<FakeLink>> links;
  {
    MutexLock lock(&mu_);
    for (auto& weak : links_) {
      if (auto link = weak.lock()) links.push_back(std::move(link));
    }
  }
  for (auto& link : links) link->Close(reason);
}

std::vector<PostedOp> FakeTransport::posted() const {
  MutexLock lock(&mu_);
  return posted_;
}

void FakeTransport::Record(const transport::DataOp& op) {
  PostedOp copy{op.kind, op.length, op.notice != nullptr,
                std::vector<transport::Block>(op.blocks, op.blocks + op.block_count)};
  MutexLock lock(&mu_);
  posted_.push_back(std::move(copy));
}

}  // namespace xferd::testing
