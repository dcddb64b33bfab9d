#include "daemon/transport/verbs/memory_windows.h"

#include <sys/random.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"

namespace xferd::transport::verbs {
namespace {

// The low 8 bits of a type-2 window's key are the binder's to choose (the
// rest names the window). Random rather than incremented: a key that does
// not work elsewhere anyway should not be guessable on its own lane either.
uint32_t FreshKey(uint32_t current) {
  uint8_t low = 0;
  while (getrandom(&low, sizeof(low), 0) != sizeof(low)) {
  }
  if (low == (current & 0xff)) ++low;  // a new key, not the window's last one
  return (current & ~uint32_t{0xff}) | low;
}

}  // namespace

absl::StatusOr<std::shared_ptr<MemoryWindows>> MemoryWindows::Create(
    std::shared_ptr<VerbsContext> context, uint32_t lanes, std::vector<WindowTarget> targets,
    int access, absl::string_view what) {
  XFERD_CHECK(lanes > 0 && !targets.empty() && targets.size() % lanes == 0);
  const auto count = static_cast<int64_t>(targets.size());
  // Counted before they exist, so concurrent grants cannot overshoot together.
  const int64_t open = context->windows.fetch_add(count) + count;
  if (open > context->attr.max_mw) {
    context->windows.fetch_sub(count);
    return absl::ResourceExhaustedError(absl::StrCat(
        "memory windows: ", what, " needs ", count, " on RDMA device ", context->port.device,
        ", which allows ", context->attr.max_mw, " (max_mw) and has ", open - count,
        " open: one per lane and memory-registration chunk of every region each peer resolved; "
        "use fewer pollers, a larger transport.verbs_mr_chunk, or fewer regions per peer"));
  }
  auto windows = std::shared_ptr<MemoryWindows>(
      new MemoryWindows(std::move(context), lanes, std::move(targets), access));
  MutexLock lock(&windows->mu_);
  for (int64_t i = 0; i < count; ++i) {
    IbvMw mw(ibv_alloc_mw(windows->context_->pd.get(), IBV_MW_TYPE_2));
    if (mw == nullptr) {
      // Those allocated so far go (and are uncounted) with `windows`.
      windows->context_->windows.fetch_sub(count - i);
      return VerbsError(absl::StrCat("ibv_alloc_mw(", what, ")"), errno);
    }
    windows->keys_.push_back(FreshKey(mw->rkey));
    windows->mws_.push_back(std::move(mw));
  }
  return windows;
}

MemoryWindows::MemoryWindows(std::shared_ptr<VerbsContext> context, uint32_t lanes,
                             std::vector<WindowTarget> targets, int access)
    : context_(std::move(context)),
      lanes_(lanes),
      per_lane_(static_cast<uint32_t>(targets.size() / lanes)),
      targets_(std::move(targets)),
      access_(access),
      pending_lanes_(lanes) {}

MemoryWindows::~MemoryWindows() { Release(); }

int MemoryWindows::PostBinds(ibv_qp* qp, uint32_t lane, uint32_t first, uint32_t count,
                             ibv_send_wr* wrs, ibv_send_wr** bad) {
  // Held across the post: the provider reads the window and the MR, which
  // Release (and the registration's end, which releases first) must not
  // free meanwhile.
  MutexLock lock(&mu_);
  if (released_) return ECANCELED;
  for (uint32_t k = 0; k < count; ++k) {
    const uint32_t w = lane * per_lane_ + first + k;
    ibv_send_wr& wr = wrs[k];
    wr.opcode = IBV_WR_BIND_MW;
    wr.sg_list = nullptr;
    wr.num_sge = 0;
    wr.bind_mw.mw = mws_[w].get();
    wr.bind_mw.rkey = keys_[w];
    wr.bind_mw.bind_info.mr = targets_[w].mr;
    wr.bind_mw.bind_info.addr = targets_[w].addr;
    wr.bind_mw.bind_info.length = targets_[w].length;
    wr.bind_mw.bind_info.mw_access_flags = static_cast<unsigned int>(access_);
    wr.next = k + 1 < count ? &wrs[k + 1] : nullptr;
  }
  return ibv_post_send(qp, wrs, bad);
}

void MemoryWindows::LaneDone(const absl::Status& status) {
  MutexLock lock(&mu_);
  if (!status.ok() && status_.ok()) status_ = status;
  if (pending_lanes_ > 0) --pending_lanes_;
}

absl::Status MemoryWindows::Wait(absl::Time deadline) {
  MutexLock lock(&mu_);
  const bool over = mu_.AwaitWithDeadline(
      [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return pending_lanes_ == 0 || !status_.ok() || released_;
      },
      deadline);
  if (!status_.ok()) return status_;
  if (released_) {
    return absl::UnavailableError(
        "the keys were revoked while being bound (region deregistered, ACL changed or link "
        "closed)");
  }
  if (!over) {
    return absl::DeadlineExceededError(absl::StrCat(
        "binding memory windows on ", context_->port.device, ": ", pending_lanes_, " of ", lanes_,
        " lanes still busy at the deadline"));
  }
  return absl::OkStatus();
}

bool MemoryWindows::usable() const {
  MutexLock lock(&mu_);
  return !released_ && status_.ok();
}

void MemoryWindows::Release() {
  MutexLock lock(&mu_);
  if (released_) return;
  released_ = true;
  context_->windows.fetch_sub(static_cast<int64_t>(mws_.size()));
  mws_.clear();  // ibv_dealloc_mw each: the NIC forgets the keys
}

}  // namespace xferd::transport::verbs
