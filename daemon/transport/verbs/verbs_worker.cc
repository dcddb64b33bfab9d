// VerbsWorker setup and teardown; its Poll is in verbs_datapath.cc.
#include "daemon/transport/verbs/verbs_worker.h"

#include <fcntl.h>
#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::unique_ptr<VerbsWorker>> VerbsWorker::Create(
    std::shared_ptr<VerbsContext> context, uint32_t cq_entries, uint32_t chain_capacity,
    const memory::RegionRegistry& regions) {
  auto worker =
      std::unique_ptr<VerbsWorker>(new VerbsWorker(std::move(context), chain_capacity, regions));
  ibv_context* ctx = worker->context_->context.get();
  worker->channel_.reset(ibv_create_comp_channel(ctx));
  if (worker->channel_ == nullptr) return VerbsError("ibv_create_comp_channel", errno);
  // Non-blocking, so Poll can take pending events without ever waiting.
  const int flags = fcntl(worker->channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(worker->channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return VerbsError("fcntl(completion channel)", errno);
  }
  const uint32_t entries =
      std::min<uint32_t>(cq_entries, static_cast<uint32_t>(worker->context_->attr.max_cqe));
  worker->cq_.reset(
      ibv_create_cq(ctx, static_cast<int>(entries), nullptr, worker->channel_.get(), 0));
  if (worker->cq_ == nullptr) return VerbsError("ibv_create_cq", errno);
  // Each lane in the table is detached once, so this many requests at most.
  ASSIGN_OR_RETURN(worker->inbox_, Inbox::Create(kMaxLanesPerWorker));
  // Grants come from control threads, as many as peers resolve regions.
  ASSIGN_OR_RETURN(worker->binds_, BindInbox::Create(BindInbox::kUnbounded));
  worker->epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!worker->epoll_.valid()) {
    return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
  }
  for (int fd : {worker->channel_->fd, worker->inbox_->fd(), worker->binds_->fd()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(worker->epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
    }
  }
  MutexLock lock(&worker->mu_);
  // The CQ may be larger than asked (devices round up); reserve only what
  // was granted.
  worker->cq_capacity_ = static_cast<uint32_t>(worker->cq_->cqe);
  return worker;
}

VerbsWorker::VerbsWorker(std::shared_ptr<VerbsContext> context, uint32_t chain_capacity,
                         const memory::RegionRegistry& regions)
    : context_(std::move(context)),
      regions_(regions),
      table_(kMaxLanesPerWorker),
      chain_wrs_(chain_capacity),
      chain_sges_(chain_capacity) {
  draining_.reserve(kMaxLanesPerWorker);
  waiting_lanes_.reserve(kMaxLanesPerWorker);
  MutexLock lock(&mu_);
  reserved_.assign(kMaxLanesPerWorker, 0);
  for (uint32_t i = kMaxLanesPerWorker; i > 0; --i) free_slots_.push_back(i - 1);
}

VerbsWorker::~VerbsWorker() {
  // Links may outlive this worker; their QPs may not outlive its CQ.
  for (auto& slot : table_) {
    if (VerbsLane* lane = slot.load()) {
      lane->LeaveTable();
    }
  }
  if (unacked_events_ > 0) ibv_ack_cq_events(cq_.get(), unacked_events_);
}

absl::StatusOr<uint32_t> VerbsWorker::AddLane(VerbsLane* lane, uint32_t cq_entries) {
  MutexLock lock(&mu_);
  if (free_slots_.empty() || cq_reserved_ + cq_entries > cq_capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("completion queue of a poller is full (", cq_reserved_, " of ", cq_capacity_,
                     " entries reserved by ", kMaxLanesPerWorker - free_slots_.size(),
                     " queue pairs): too many peers for this daemon"));
  }
  const uint32_t index = free_slots_.back();
  free_slots_.pop_back();
  reserved_[index] = cq_entries;
  cq_reserved_ += cq_entries;
  table_[index].store(lane, std::memory_order_release);
  lanes_.fetch_add(1, std::memory_order_relaxed);
  return index;
}

void VerbsWorker::RequestDetach(std::shared_ptr<Link> keep_alive, VerbsLane* lane) {
  // The inbox holds kMaxLanesPerWorker: a lane in the table is detached once.
  XFERD_CHECK(inbox_->Push(Detaching{lane, std::move(keep_alive)}));
}

void VerbsWorker::ForgetLane(VerbsLane* lane) {
  MutexLock lock(&mu_);
  std::atomic<VerbsLane*>& slot = table_[lane->index()];
  XFERD_CHECK(slot.load(std::memory_order_relaxed) == lane);
  slot.store(nullptr, std::memory_order_release);
  lanes_.fetch_sub(1, std::memory_order_relaxed);
}

void VerbsWorker::RequestBind(std::shared_ptr<Link> keep_alive, VerbsLane* lane, BindJob job) {
  XFERD_CHECK(binds_->Push(Binding{lane, std::move(keep_alive), std::move(job)}));
}

void VerbsWorker::ListWaiting(VerbsLane* lane) {
  if (lane->listed()) return;
  lane->set_listed(true);
  waiting_lanes_.push_back(lane);  // reserved for every lane of the table
}

void VerbsWorker::ReapDrained() {
  for (size_t i = 0; i < draining_.size();) {
    VerbsLane* lane = draining_[i].lane;
    if (!lane->drained()) {
      ++i;
      continue;
    }
    lane->LeaveTable();
    {
      MutexLock lock(&mu_);
      const uint32_t index = lane->index();
      table_[index].store(nullptr, std::memory_order_release);
      cq_reserved_ -= reserved_[index];
      reserved_[index] = 0;
      free_slots_.push_back(index);
    }
    lanes_.fetch_sub(1, std::memory_order_relaxed);
    draining_[i] = std::move(draining_.back());
    draining_.pop_back();
  }
}

bool VerbsWorker::PrepareToSleep() {
  if (!armed_) {
    // Arm, then report "not yet": the poller polls the CQ once more, catching
    // completions that arrived before the arming; later ones raise an event.
    if (int rc = ibv_req_notify_cq(cq_.get(), 0); rc != 0) return false;
    armed_ = true;
    return false;
  }
  // Last: a true commits to the sleep (both eventfds are in the epoll set).
  return binds_->PrepareToSleep() && inbox_->PrepareToSleep();
}

void VerbsWorker::ConsumeChannelEvents() {
  ibv_cq* cq;
  void* cq_context;
  while (ibv_get_cq_event(channel_.get(), &cq, &cq_context) == 0) {
    armed_ = false;  // an event disarms the CQ
    // Acknowledging takes a lock inside libibverbs: do it in batches.
    if (++unacked_events_ >= 64) {
      ibv_ack_cq_events(cq_.get(), unacked_events_);
      unacked_events_ = 0;
    }
  }
}

}  // namespace xferd::transport::verbs
