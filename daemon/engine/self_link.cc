// SelfLink: region-to-region copies on the pollers.
#include "daemon/engine/self_link.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/engine/peer.h"
#include "daemon/engine/transfer.h"
#include "daemon/memory/guarded_copy.h"
#include "daemon/transport/verified_op.h"

namespace xferd::engine {
namespace {

// Ops a lane takes per Post: it holds none (each is done within the call),
// so this only bounds one call's work.
constexpr uint32_t kSelfLaneCredits = 64;

// `op`'s blocks as (source, destination) pairs between `local` (the op's
// local region) and `own` (the other region), the way `write` goes.
uint32_t Pieces(const transport::DataOp& op, std::byte* local, std::byte* own, bool write,
                iovec* from, iovec* to) {
  std::byte* src = write ? local : own;
  std::byte* dst = write ? own : local;
  for (uint32_t i = 0; i < op.block_count; ++i) {
    const transport::Block& b = op.blocks[i];
    from[i] = {src + (write ? b.local_offset : b.remote_offset), b.length};
    to[i] = {dst + (write ? b.remote_offset : b.local_offset), b.length};
  }
  return op.block_count;
}

// A copy that faulted: the file region(s) whose file is now shorter are
// marked broken, or if none is (an I/O error), every file region of the two.
absl::Status LoseMemory(memory::Region& a, memory::Region& b) {
  const bool a_shrunk = a.can_lose_memory() && a.backing().FileShrunk();
  const bool b_shrunk = b.can_lose_memory() && b.backing().FileShrunk();
  const bool either = a_shrunk || b_shrunk;
  absl::Status lost;
  for (auto [region, shrunk] : {std::pair{&a, a_shrunk}, std::pair{&b, b_shrunk}}) {
    if (!region->can_lose_memory() || (either && !shrunk)) continue;
    absl::Status status = region->MarkLost();
    if (lost.ok()) lost = std::move(status);
  }
  return lost;
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
    memory::Region& local = *t.plan().local;
    iovec from[transport::kMaxBlocksPerOp];
    iovec to[transport::kMaxBlocksPerOp];
    const uint32_t n = Pieces(op, op.local_base, own.data(),
                              op.kind == transport::OpKind::kWrite, from, to);
    // Memory and SHM regions keep their pages (SHM memfds are sealed
    // against shrinking); only a file can lose them under the copy, which
    // the kernel then reports (memory::GuardedCopy) where a memmove would
    // die of SIGBUS.
    const bool guarded = local.can_lose_memory() || own.can_lose_memory();
    const bool write = op.kind == transport::OpKind::kWrite;
    memory::Region& src = write ? local : own;
    memory::Region& dst = write ? own : local;
    // Verified: the source is checksummed as it is copied, and what landed
    // is checked against it.
    if (op.checksums != nullptr) transport::TakeChecksums(&src, from, n, op.checksums);
    absl::Status error;
    if (guarded) {
      if (memory::GuardedCopy(to, n, from, n) != static_cast<ssize_t>(op.length)) {
        error = LoseMemory(local, own);
      }
    } else {
      // memmove: a transfer within one region may overlap itself.
      for (uint32_t i = 0; i < n; ++i) {
        std::memmove(to[i].iov_base, from[i].iov_base, to[i].iov_len);
      }
    }
    transport::ChecksumMismatch mismatch;
    const bool landed_right = !error.ok() || op.checksums == nullptr ||
                              transport::CheckLanded(&dst, to, n, op.checksums, &mismatch);
    mismatch.checksums = op.checksums;
    if (error.ok() && landed_right && op.notice != nullptr) {
      sink_.OnLanded(transport::Landing{t.plan().remote_key->own_region, link_.peer_name(),
                                        *op.notice, absl::Now()});
    }
    sink_.OnOpDone(transport::OpCompletion{op.cookie, op.length, error.ok() ? nullptr : &error,
                                           landed_right ? nullptr : &mismatch});
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
