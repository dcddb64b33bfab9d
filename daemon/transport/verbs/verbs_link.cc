#include "daemon/transport/verbs/verbs_link.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {
namespace {

constexpr size_t kLaneRingBytes = kNoticeSlots * kNoticeRecordBytes;

}  // namespace

absl::StatusOr<std::shared_ptr<VerbsLink>> VerbsLink::Create(
    std::shared_ptr<VerbsContext> context, std::vector<VerbsWorker*> workers,
    const VerbsLinkSettings& settings, PeerIdentity peer, uint32_t lanes, Link* owner,
    std::weak_ptr<Link> owner_alive, std::function<void()> on_close) {
  auto link = std::shared_ptr<VerbsLink>(
      new VerbsLink(std::move(context), std::move(workers), settings, std::move(peer), owner,
                    std::move(owner_alive), std::move(on_close)));
  if (absl::Status s = link->Build(lanes); !s.ok()) {
    // Lanes already in worker tables leave through their workers.
    link->Close(s);
    return s;
  }
  return link;
}

VerbsLink::VerbsLink(std::shared_ptr<VerbsContext> context, std::vector<VerbsWorker*> workers,
                     const VerbsLinkSettings& settings, PeerIdentity peer, Link* owner,
                     std::weak_ptr<Link> owner_alive, std::function<void()> on_close)
    : Link(std::move(peer)),
      context_(std::move(context)),
      workers_(std::move(workers)),
      settings_(settings),
      owner_(owner),
      owner_alive_(std::move(owner_alive)),
      on_close_(std::move(on_close)) {}

// A link dropped without Close still has its queue pairs: the windows
// bound to them go first.
VerbsLink::~VerbsLink() { ReleaseWindows(); }

absl::Status VerbsLink::Build(uint32_t lanes) {
  ring_lanes_ = lanes;
  const size_t half = lanes * kLaneRingBytes;
  ring_ = std::make_unique<uint8_t[]>(2 * half);
  // With windows, the peer writes its lane's slots through a window bound to
  // that lane alone; the MR's own key reaches nothing.
  const int remote = settings_.memory_windows ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE;
  ring_in_mr_.reset(
      ibv_reg_mr(context_->pd.get(), ring_.get(), half, IBV_ACCESS_LOCAL_WRITE | remote));
  if (ring_in_mr_ == nullptr) return VerbsError("ibv_reg_mr(notice ring)", errno);
  ring_out_mr_.reset(ibv_reg_mr(context_->pd.get(), ring_.get() + half, half, 0));
  if (ring_out_mr_ == nullptr) return VerbsError("ibv_reg_mr(notice records)", errno);
  {
    MutexLock lock(&mu_);
    detached_.assign(lanes, false);
  }
  for (uint32_t i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<VerbsLane>(
        *this, owner_ != nullptr ? owner_->counters() : counters(), *workers_[i],
        settings_.ops_depth, settings_.send_depth, context_->index, i));
    lane_count_.store(i + 1, std::memory_order_release);
    RETURN_IF_ERROR(
        lanes_.back()->Create(context_->pd.get(), settings_.path.port, settings_.max_inline));
  }
  if (!settings_.memory_windows) return absl::OkStatus();
  // After the queue pairs they will be bound to: a process killed with its
  // links open has the kernel destroy its verbs objects newest first, and
  // rxe stalls ~50 s destroying a queue pair that still has windows bound
  // (peers' writes meanwhile still find it).
  std::vector<WindowTarget> slots;
  for (uint32_t i = 0; i < lanes; ++i) {
    slots.push_back(WindowTarget{ring_in_mr_.get(),
                                 reinterpret_cast<uint64_t>(ring_.get()) + i * kLaneRingBytes,
                                 kLaneRingBytes});
  }
  ASSIGN_OR_RETURN(ring_windows_, MemoryWindows::Create(context_, lanes, std::move(slots),
                                                        IBV_ACCESS_REMOTE_WRITE, "notice ring"));
  return absl::OkStatus();
}

void VerbsLink::Describe(DeviceEndpoints* out) const {
  const PortSelection& port = context_->port;
  out->name = port.device;
  out->index = context_->index;
  out->rate_mbps = port.rate_mbps;
  out->queue_pairs.clear();
  const uint32_t lanes = lane_count();
  for (uint32_t i = 0; i < lanes; ++i) {
    out->queue_pairs.push_back(lanes_[i]->local_endpoint(settings_.path, port.gid.raw, port.lid));
    if (ring_windows_ != nullptr) out->queue_pairs.back().notice_rkey = ring_windows_->keys()[i];
  }
  out->notice_ring_addr = reinterpret_cast<uint64_t>(ring_.get());
  out->notice_ring_rkey = ring_windows_ != nullptr ? 0 : ring_in_mr_->rkey;
}

absl::Status VerbsLink::Activate(const LinkEndpoints& remote, const DeviceEndpoints& device) {
  if (remote.kind != TransportKind::kVerbs) {
    return absl::FailedPreconditionError(
        absl::StrCat("peer ", peer().node_id, " uses the ", TransportKindName(remote.kind),
                     " transport but this daemon uses verbs: configure the same on both"));
  }
  if (remote.lanes == 0 || remote.lanes > lanes_.size() ||
      device.queue_pairs.size() < remote.lanes || remote.notice_ring_slots != kNoticeSlots ||
      remote.max_rd_atomic == 0 || remote.max_dest_rd_atomic == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer ", peer().node_id, " answered with ", remote.lanes, " lanes (",
        device.queue_pairs.size(), " queue pairs on ", device.name, ", ", remote.notice_ring_slots,
        " notice slots, RDMA READ depths ", remote.max_rd_atomic, "/", remote.max_dest_rd_atomic,
        "); this daemon offered ", lanes_.size(), " lanes and ", kNoticeSlots, " slots"));
  }
  // Each direction gets what both ends allow: our reads may not outnumber
  // the responder resources of the peer's queue pair, and the reverse.
  QpPath path = settings_.path;
  path.max_rd_atomic =
      static_cast<uint8_t>(std::min<uint32_t>(settings_.max_rd_atomic, remote.max_dest_rd_atomic));
  path.max_dest_rd_atomic =
      static_cast<uint8_t>(std::min<uint32_t>(settings_.max_dest_rd_atomic, remote.max_rd_atomic));
  // The peer has fewer pollers: our extra lanes go.
  for (uint32_t i = remote.lanes; i < lanes_.size(); ++i) Detach(i);
  lane_count_.store(remote.lanes, std::memory_order_release);
  const size_t half = ring_lanes_ * kLaneRingBytes;
  for (uint32_t i = 0; i < remote.lanes; ++i) {
    NoticeArea area;
    area.incoming = ring_.get() + i * kLaneRingBytes;
    area.outgoing = ring_.get() + half + i * kLaneRingBytes;
    area.outgoing_lkey = ring_out_mr_->lkey;
    area.remote_addr = device.notice_ring_addr + i * kLaneRingBytes;
    const uint32_t lane_rkey = device.queue_pairs[i].notice_rkey;
    area.remote_rkey = lane_rkey != 0 ? lane_rkey : device.notice_ring_rkey;
    RETURN_IF_ERROR(lanes_[i]->Activate(path, device.queue_pairs[i], area, device.index));
  }
  // Now that the queue pairs can send: the ring's windows, each on its lane.
  if (ring_windows_ != nullptr) RequestBinds(ring_windows_, remote.lanes);
  active_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status VerbsLink::Connect(const PeerIdentity& remote_peer, const LinkEndpoints& remote,
                                absl::Time) {
  set_peer(remote_peer);
  absl::Status status =
      remote.devices.empty()
          ? absl::InvalidArgumentError(absl::StrCat("peer ", remote_peer.node_id,
                                                    " answered with no RDMA device"))
          : Activate(remote, remote.devices[0]);
  if (!status.ok()) Close(status);
  return status;
}

void VerbsLink::Detach(uint32_t lane) {
  {
    MutexLock lock(&mu_);
    if (detached_[lane]) return;
    detached_[lane] = true;
  }
  if (!lanes_[lane]->in_table()) return;  // its Create failed before the worker knew it
  workers_[lane]->RequestDetach(KeepAlive(), lanes_[lane].get());
}

std::shared_ptr<Link> VerbsLink::KeepAlive() {
  // The owner's striped lanes hear of this link's completions, and a rejoin
  // may have replaced this link in its owner: both stay alive until the
  // lane is gone.
  std::shared_ptr<Link> keep_alive = shared_from_this();
  if (std::shared_ptr<Link> owner = owner_alive_.lock()) {
    using Both = std::pair<std::shared_ptr<Link>, std::shared_ptr<Link>>;
    keep_alive = std::shared_ptr<Link>(std::make_shared<Both>(std::move(owner), keep_alive), this);
  }
  return keep_alive;
}

void VerbsLink::Close(absl::Status reason) {
  if (!MarkBroken(std::move(reason))) return;
  spdlog::info("link to {} on {} closed: {}", peer().node_id, context_->port.device,
               status().message());
  // The keys handed to the peer die with the link, before its queue pairs.
  ReleaseWindows();
  for (uint32_t i = 0; i < lanes_.size(); ++i) Detach(i);
  if (on_close_) on_close_();
}

void VerbsLink::ReleaseWindows() {
  std::vector<std::shared_ptr<MemoryWindows>> granted;
  {
    MutexLock lock(&mu_);
    for (auto& [id, weak] : windows_) {
      if (std::shared_ptr<MemoryWindows> w = weak.lock()) granted.push_back(std::move(w));
    }
    windows_.clear();
  }
  for (const auto& w : granted) w->Release();
  if (ring_windows_ != nullptr) ring_windows_->Release();
}

}  // namespace xferd::transport::verbs
