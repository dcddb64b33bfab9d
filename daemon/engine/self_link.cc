// SelfLink: region-to-region copies on the pollers.
#include "daemon/engine/self_link.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/engine/peer.h"
#include "daemon/engine/transfer.h"

namespace xferd::engine {
namespace {

// Ops a lane takes per Post: it holds none (each is done within the call),
// so this only bounds one call's work.
constexpr uint32_t kSelfLaneCredits = 64;

// The kernel copies `op`'s blocks from `src` to `dst` (bases of regions of
// this process): a page that went away under a mapping (a file region whose
// file another process truncated) is EFAULT here, where a memcpy would
// die of SIGBUS. Returns 0 or the errno (EFAULT for a copy cut short).
int KernelCopy(const transport::DataOp& op, const std::byte* src, std::byte* dst, bool write) {
  iovec from[transport::kMaxBlocksPerOp];
  iovec to[transport::kMaxBlocksPerOp];
  for (uint32_t i = 0; i < op.block_count; ++i) {
    const transport::Block& b = op.blocks[i];
    const uint64_t src_offset = write ? b.local_offset : b.remote_offset;
    const uint64_t dst_offset = write ? b.remote_offset : b.local_offset;
    from[i] = {const_cast<std::byte*>(src + src_offset), b.length};
    to[i] = {dst + dst_offset, b.length};
  }
  const ssize_t n = ::process_vm_writev(::getpid(), from, op.block_count, to, op.block_count, 0);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(op.length) ? 0 : EFAULT;
}

}  // namespace

class SelfLink::SelfLane final : public transport::Lane {
 public:
  SelfLane(SelfLink& link, transport::CompletionSink& sink) : link_(link), sink_(sink) {}

  uint32_t credits() const override { return broken() ? 0 : kSelfLaneCredits; }
  bool broken() const override { return link_.broken(); }

  uint32_t Post(absl::Span<const transport::DataOp> ops) override {
    if (broken()) return 0;
    for (const transport::DataOp& op : ops) Copy(op);
    return static_cast<uint32_t>(ops.size());
  }

 private:
  // The other region is the transfer's own key (planned against this
  // daemon's registry), which holds it while the transfer runs: the cookie
  // names the transfer, as every op of the engine's does.
  void Copy(const transport::DataOp& op) {
    const Transfer& t = *CookieTransfer(op.cookie);
    memory::Region& own = *t.plan().remote_key->own_region;
    const memory::Region& local = *t.plan().local;
    const bool write = op.kind == transport::OpKind::kWrite;
    const std::byte* src = write ? op.local_base : own.data();
    std::byte* dst = write ? own.data() : op.local_base;
    // Memory and SHM regions keep their pages (SHM memfds are sealed
    // against shrinking); only a file can lose them under the copy.
    const bool guarded = !local.spec().file_path.empty() || !own.spec().file_path.empty();
    absl::Status error;
    if (guarded) {
      if (const int err = KernelCopy(op, src, dst, write); err != 0) {
        error = absl::FailedPreconditionError(absl::StrCat(
            "copying between regions '", local.name(), "' and '", own.name(),
            "' of this daemon failed (", std::strerror(err),
            "): a file region's file is shorter than the region (truncated?): re-register it"));
      }
    } else {
      // memmove: a transfer within one region may overlap itself.
      for (uint32_t i = 0; i < op.block_count; ++i) {
        const transport::Block& b = op.blocks[i];
        std::memmove(dst + (write ? b.remote_offset : b.local_offset),
                     src + (write ? b.local_offset : b.remote_offset), b.length);
      }
    }
    if (error.ok() && op.notice != nullptr) {
      sink_.OnLanded(transport::Landing{t.plan().remote_key->own_region, link_.peer_name(),
                                        *op.notice, absl::Now()});
    }
    sink_.OnOpDone(transport::OpCompletion{op.cookie, op.length, error.ok() ? nullptr : &error});
  }

  SelfLink& link_;
  transport::CompletionSink& sink_;
};

SelfLink::SelfLink(transport::PeerIdentity self, std::vector<transport::CompletionSink*> sinks)
    : Link(std::move(self)) {
  for (transport::CompletionSink* sink : sinks) {
    lanes_.push_back(std::make_unique<SelfLane>(*this, *sink));
  }
}

SelfLink::~SelfLink() = default;

transport::Lane& SelfLink::lane(uint32_t index) {
  XFERD_CHECK(index < lanes_.size());
  return *lanes_[index];
}

}  // namespace xferd::engine
