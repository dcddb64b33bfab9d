// VerbsLane setup and teardown; its data path is in verbs_datapath.cc.
#include "daemon/transport/verbs/verbs_lane.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {
namespace {

uint32_t RandomPsn() {
  uint32_t value = 0;
  while (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
  }
  return value & 0xffffff;  // PSNs are 24 bits
}

}  // namespace

VerbsLane::VerbsLane(Link& link, LinkCounters& counters, VerbsWorker& worker, uint32_t ops_depth,
                     uint32_t send_depth, uint32_t local_device, uint32_t lane)
    : link_(link),
      counters_(counters),
      worker_(worker),
      ops_depth_(ops_depth),
      sq_depth_(send_depth),
      psn_(RandomPsn()),
      local_device_(local_device),
      lane_(lane),
      slots_(sq_depth_),
      waiting_(ops_depth_),
      wrs_(worker.chain_wrs()),
      sges_(worker.chain_sges()) {
  XFERD_CHECK(send_depth >= kMaxWrsPerOp && send_depth <= worker.chain_capacity());
}

VerbsLane::~VerbsLane() {
  // Whoever waits for these binds learns now rather than at its deadline.
  const absl::Status gone = absl::UnavailableError("the lane was torn down before its binds ran");
  FailPendingBinds(gone);
  for (BindJob& job : posted_binds_) job.windows->LaneDone(gone);
  // Torn down undrained (never reaped): the QP goes first, then the worker
  // forgets the lane, whose slot would otherwise dangle (the worker's
  // destructor and Poll reach lanes through it).
  qp_.reset();
  if (in_table_) worker_.ForgetLane(this);
}

uint32_t VerbsLane::credits() const {
  if (!active_.load(std::memory_order_acquire) || broken() || draining_) return 0;
  // Ops, not send-queue entries: an op the queue has no room for yet waits
  // in the lane (PostWaiting), so the queue is bounded by the requests ops
  // actually need, not by their worst case.
  return ops_depth_ - ops_in_flight_;
}

absl::Status VerbsLane::Create(ibv_pd* pd, uint8_t port, uint32_t max_inline) {
  // Room in the CQ for every send (flushes complete even unsignaled ones)
  // and every receive this QP can have outstanding.
  ASSIGN_OR_RETURN(index_, worker_.AddLane(this, sq_depth_ + kRecvDepth));
  in_table_ = true;
  ASSIGN_OR_RETURN(qp_, CreateRcQp(pd, worker_.cq(), QpCaps{sq_depth_, kRecvDepth, max_inline},
                                   this, &max_inline_));
  qp_num_ = qp_->qp_num;
  RETURN_IF_ERROR(ModifyToInit(qp_.get(), port));
  // Receives must be posted before the QP reaches RTR and can take a
  // WRITE_WITH_IMM.
  return PostReceives(kRecvDepth);
}

QueuePairEndpoint VerbsLane::local_endpoint(const QpPath& path, const std::array<uint8_t, 16>& gid,
                                            uint16_t lid) const {
  QueuePairEndpoint e;
  e.qpn = qp_->qp_num;
  e.psn = psn_;
  e.lid = lid;
  e.gid = gid;
  e.gid_index = path.sgid_index;
  e.mtu = path.mtu;
  return e;
}

absl::Status VerbsLane::Activate(const QpPath& path, const QueuePairEndpoint& remote,
                                 NoticeArea notices, uint32_t remote_device) {
  notices_ = notices;
  remote_device_ = remote_device;
  remote_qpn_ = remote.qpn;
  RETURN_IF_ERROR(ModifyToRtr(qp_.get(), path, remote));
  RETURN_IF_ERROR(ModifyToRts(qp_.get(), path, psn_));
  active_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status VerbsLane::PostReceives(uint32_t count) {
  // WRITE_WITH_IMM consumes a receive but places no data in it: no buffers.
  ibv_recv_wr wrs[kRecvDepth];
  for (uint32_t i = 0; i < count; ++i) {
    wrs[i] = ibv_recv_wr{};
    wrs[i].wr_id = MakeWrId(index_, kRecvFlag);
    wrs[i].next = i + 1 < count ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), wrs, &bad); rc != 0) {
    // Those before `bad` were posted.
    for (ibv_recv_wr* w = wrs; w != bad; w = w->next) ++recvs_posted_;
    return VerbsError("ibv_post_recv", rc);
  }
  recvs_posted_ += count;
  return absl::OkStatus();
}

bool VerbsLane::AddBind(BindJob job) {
  if (draining_ || link_.broken() || qp_ == nullptr) {
    job.windows->LaneDone(absl::UnavailableError(
        absl::StrCat("link to ", link_.peer().node_id, " closed before its keys were bound")));
    return false;
  }
  pending_binds_.push_back(std::move(job));
  PostBinds();
  return !pending_binds_.empty();
}

void VerbsLane::PostBinds() {
  while (!pending_binds_.empty() && active_.load(std::memory_order_relaxed) && !draining_ &&
         !link_.broken()) {
    BindJob& job = pending_binds_.front();
    const uint32_t free = sq_depth_ - static_cast<uint32_t>(posted_ - retired_);
    if (free == 0) return;  // completions make room
    const uint32_t count = std::min(free, job.windows->per_lane() - job.next);
    const uint64_t first_seq = posted_ + 1;
    for (uint32_t k = 0; k < count; ++k) {
      const uint64_t seq = ++posted_;
      SendSlot& slot = slots_[seq % sq_depth_];
      slot = SendSlot{};
      slot.ends_bind = job.next + k + 1 == job.windows->per_lane();
      wrs_[k] = ibv_send_wr{};
      wrs_[k].wr_id = MakeWrId(index_, seq & kSeqMask);
    }
    // As every chain's: its last request signaled, so its entries come back.
    wrs_[count - 1].send_flags = IBV_SEND_SIGNALED;
    unsignaled_ = 0;
    ibv_send_wr* bad = nullptr;
    const int rc = job.windows->PostBinds(qp_.get(), lane_, job.next, count, wrs_, &bad);
    if (rc == 0) {
      job.next += count;
      if (job.next == job.windows->per_lane()) {
        posted_binds_.push_back(std::move(job));
        pending_binds_.pop_front();
      }
      continue;
    }
    // Requests from `bad` on were not posted (none when the grant was
    // revoked meanwhile); those before retire silently: none ends the job.
    posted_ = first_seq - 1 + (rc == ECANCELED ? 0 : static_cast<uint32_t>(bad - wrs_));
    const absl::Status status =
        rc == ECANCELED
            ? absl::UnavailableError("the keys were revoked before they were bound")
            : VerbsError(absl::StrCat("ibv_post_send(bind) to ", link_.peer().node_id), rc);
    job.windows->LaneDone(status);
    pending_binds_.pop_front();
    // Outside the windows' lock (Close releases windows).
    if (rc != ECANCELED) link_.Close(status);
  }
}

void VerbsLane::FailPendingBinds(const absl::Status& status) {
  for (BindJob& job : pending_binds_) job.windows->LaneDone(status);
  pending_binds_.clear();
}

void VerbsLane::BeginDrain() {
  draining_ = true;
  active_.store(false, std::memory_order_release);
  if (qp_ == nullptr) {
    recvs_posted_ = 0;
    return;
  }
  // In ERR, every outstanding send and receive completes with a flush error;
  // drained() turns true when all are back.
  (void)ModifyToError(qp_.get());
}

}  // namespace xferd::transport::verbs
