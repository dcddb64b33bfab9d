#include "tests/unit/engine/fake_transport.h"

#include <sys/eventfd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace xferd::testing {
namespace {

class FakeLane final : public transport::Lane {
 public:
  FakeLane(transport::Link& link, uint32_t depth) : link_(link), depth_(depth) {}
  uint32_t credits() const override { return broken() ? 0 : depth_ - in_flight; }
  bool broken() const override { return link_.broken(); }

  transport::Link& link_;
  const uint32_t depth_;
  uint32_t in_flight = 0;  // poller thread only
};

class FakeLink final : public transport::Link {
 public:
  FakeLink(transport::PeerIdentity peer, uint32_t lanes, uint32_t depth) : Link(std::move(peer)) {
    for (uint32_t i = 0; i < lanes; ++i) lanes_.push_back(std::make_unique<FakeLane>(*this, depth));
  }
  absl::Status Connect(const transport::PeerIdentity& peer, const transport::LinkEndpoints&,
                       absl::Time) override {
    set_peer(peer);
    return absl::OkStatus();
  }
  void Close(absl::Status reason) override { MarkBroken(std::move(reason)); }
  uint32_t lane_count() const override { return static_cast<uint32_t>(lanes_.size()); }
  transport::Lane& lane(uint32_t index) override { return *lanes_[index]; }
  bool ready() const override { return !broken(); }

 private:
  std::vector<std::unique_ptr<FakeLane>> lanes_;
};

struct NoKeys : memory::TransportRegistration {};

}  // namespace

class FakeTransport::Worker final : public transport::TransportWorker {
 public:
  explicit Worker(FakeTransport& owner)
      : owner_(owner), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  uint32_t Post(transport::Lane& lane, absl::Span<const transport::DataOp> ops) override {
    auto& fake = static_cast<FakeLane&>(lane);
    const uint32_t n = std::min<uint32_t>(fake.credits(), static_cast<uint32_t>(ops.size()));
    for (uint32_t i = 0; i < n; ++i) {
      pending_.push_back({&fake, ops[i]});
      owner_.Record(ops[i]);
    }
    fake.in_flight += n;
    return n;
  }

  uint32_t Poll(transport::CompletionSink& sink) override {
    uint32_t handled = 0;
    while (!pending_.empty()) {
      auto [lane, op] = pending_.front();
      if (owner_.held() && !lane->broken()) break;
      pending_.pop_front();
      --lane->in_flight;
      const absl::Status status = lane->broken() ? lane->link_.status() : Deliver(*lane, op);
      if (status.ok()) lane->link_.counters().bytes_sent.fetch_add(op.length);
      sink.OnOpDone({op.cookie, op.length, status.ok() ? nullptr : &status});
      ++handled;
    }
    return handled;
  }

  int wait_fd() const override { return wake_.get(); }
  bool PrepareToSleep() override { return pending_.empty(); }

 private:
  // What a receiving daemon checks before it places a write or serves a
  // read: every block of the op, before any byte moves.
  absl::Status Deliver(FakeLane& lane, const transport::DataOp& op) {
    FakeTransport* peer = owner_.fabric_.Find(lane.link_.peer().node_id);
    if (peer == nullptr) return absl::UnavailableError("peer gone");
    std::shared_ptr<memory::Region> region = peer->regions().FindById(op.remote->region_id);
    if (region == nullptr) return absl::NotFoundError("region id not registered");
    const bool write = op.kind == transport::OpKind::kWrite;
    if (write && !region->access().remote_write) {
      return absl::PermissionDeniedError("no remote write");
    }
    if (!write && !region->access().remote_read) {
      return absl::PermissionDeniedError("no remote read");
    }
    for (uint32_t i = 0; i < op.block_count; ++i) {
      const transport::Block& b = op.blocks[i];
      absl::Status range =
          region->CheckRange(b.remote_offset, b.length, write ? "destination" : "source");
      if (!range.ok()) return range;
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
    if (op.notice != nullptr) {
      memory::LandedEvent event{
          op.notice->offset, op.notice->length, owner_.node(), op.notice->transfer_id, 0,
          absl::Now()};
      event.blocks = op.notice->blocks;
      event.bytes = op.notice->bytes;
      region->landed().Publish(std::move(event));
    }
    return absl::OkStatus();
  }

  FakeTransport& owner_;
  UniqueFd wake_;
  std::deque<std::pair<FakeLane*, transport::DataOp>> pending_;
};

void FakeFabric::Add(const std::string& node, FakeTransport* transport) {
  MutexLock lock(&mu_);
  nodes_[node] = transport;
}

FakeTransport* FakeFabric::Find(const std::string& node) {
  MutexLock lock(&mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second;
}

FakeTransport::FakeTransport(FakeFabric& fabric, std::string node,
                             const memory::RegionRegistry& regions, uint32_t pollers,
                             uint32_t depth)
    : fabric_(fabric), node_(std::move(node)), regions_(regions), pollers_(pollers), depth_(depth) {
  for (uint32_t i = 0; i < pollers; ++i) workers_.push_back(std::make_unique<Worker>(*this));
  fabric_.Add(node_, this);
}

FakeTransport::~FakeTransport() { fabric_.Add(node_, nullptr); }

transport::TransportWorker& FakeTransport::worker(uint32_t index) { return *workers_[index]; }

absl::StatusOr<std::shared_ptr<transport::Link>> FakeTransport::CreateLink(
    transport::LinkEndpoints* local) {
  local->lanes = pollers_;
  auto link = std::make_shared<FakeLink>(transport::PeerIdentity{}, pollers_, depth_);
  links_.Add(link);
  return std::shared_ptr<transport::Link>(link);
}

absl::StatusOr<std::shared_ptr<transport::Link>> FakeTransport::AcceptLink(
    const transport::PeerIdentity& peer, const transport::LinkEndpoints& remote,
    transport::LinkEndpoints* local) {
  local->lanes = std::min(pollers_, remote.lanes);
  auto link = std::make_shared<FakeLink>(peer, local->lanes, depth_);
  links_.Add(link);
  return std::shared_ptr<transport::Link>(link);
}

transport::RemoteRegion FakeTransport::DescribeRegion(const memory::Region& region) const {
  return transport::RemoteRegion{region.id(), region.size(), 0, 0, {}};
}

absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> FakeTransport::RegisterMemory(
    const memory::Region&) {
  return std::make_unique<NoKeys>();
}

void FakeTransport::Shutdown() { links_.CloseAll(absl::UnavailableError("transport shut down")); }

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
