// A region's RDMA memory registration, on every device the transport drives
// (each has its own protection domain, so its own keys). Peers get exactly
// the access the region allows (remote write and/or read, nothing for a
// local-only source): through memory windows bound to their own queue pairs
// (the MRs then grant no remote access themselves, only window binding), or
// with memory windows off through the MRs' keys. Our own NIC may write any
// writable region (RDMA READs land there). Large regions are registered as
// several MRs of `chunk` bytes, by several threads at once: pinning is what
// makes registration slow, and it parallelizes.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/base/mutex.h"
#include "daemon/memory/region.h"
#include "daemon/transport/verbs/ibv.h"
#include "daemon/transport/verbs/memory_windows.h"
#include "daemon/transport/verbs/verbs_context.h"

namespace xferd::transport::verbs {

class VerbsRegistration final : public memory::TransportRegistration {
 public:
  // `threads` bounds the registrations running at once. `open_mrs` counts
  // the MRs alive (for stats); it is shared with the transport.
  // The registration holds the `contexts`: its MRs must go before their PDs
  // do, whatever outlives what.
  // `local_write`: the mapping is writable, so reads may land in it.
  // `windows`: peers get access through memory windows only.
  static absl::StatusOr<std::unique_ptr<VerbsRegistration>> Create(
      std::vector<std::shared_ptr<VerbsContext>> contexts, std::byte* base, uint64_t size,
      const memory::Access& access, bool local_write, bool windows, uint64_t chunk, int threads,
      std::shared_ptr<std::atomic<int64_t>> open_mrs);
  // Releases the windows bound to the MRs first: a device refuses to
  // deregister an MR that still has some.
  ~VerbsRegistration() override;

  const std::byte* base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t chunk_bytes() const { return chunk_; }
  // The lkey covering byte `offset` of the region on device `device`. Data
  // path: no checks.
  uint32_t lkey_at(uint32_t device, uint64_t offset) const {
    return mrs_[device][offset / chunk_]->lkey;
  }
  std::vector<uint32_t> rkeys(uint32_t device) const;
  uint32_t chunks() const { return static_cast<uint32_t>(mrs_.front().size()); }
  uint32_t devices() const { return static_cast<uint32_t>(mrs_.size()); }
  size_t mr_count() const;

  // The spans windows on device `device` cover: each MR chunk, whole.
  std::vector<WindowTarget> WindowTargets(uint32_t device) const;
  // Keeps `windows` (bound to these MRs) to release them with the
  // registration. Any thread; bookkeeping only, hence const.
  void KeepWindows(std::shared_ptr<MemoryWindows> windows) const;
  // Releases every window granted on this region, to every peer.
  void RevokeWindows() const;

  // The ibv access flags for a region's access: its MRs' (`windows`: they
  // grant remote access through windows only), or its windows'.
  static int AccessFlags(const memory::Access& access, bool local_write, bool windows);
  static int WindowAccess(const memory::Access& access);

 private:
  VerbsRegistration(std::vector<std::shared_ptr<VerbsContext>> contexts, std::byte* base,
                    uint64_t size, uint64_t chunk, std::vector<std::vector<IbvMr>> mrs,
                    std::shared_ptr<std::atomic<int64_t>> open_mrs);

  // Declared first, destroyed last: the PDs outlive the MRs below.
  const std::vector<std::shared_ptr<VerbsContext>> contexts_;
  std::byte* const base_;
  const uint64_t size_;
  const uint64_t chunk_;
  std::vector<std::vector<IbvMr>> mrs_;  // [device][chunk]
  const std::shared_ptr<std::atomic<int64_t>> open_mrs_;
  mutable Mutex windows_mu_;
  mutable std::vector<std::shared_ptr<MemoryWindows>> windows_ ABSL_GUARDED_BY(windows_mu_);
};

}  // namespace xferd::transport::verbs
