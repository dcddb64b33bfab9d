#include "daemon/transport/verbs/verbs_registration.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/base/mutex.h"
#include "daemon/base/units.h"

namespace xferd::transport::verbs {

int VerbsRegistration::AccessFlags(const memory::Access& access, bool local_write, bool windows) {
  int flags = 0;
  // Our RDMA READs land in the region. Only a read-only file mapping lacks
  // it: the kernel would refuse to pin it for writing.
  if (local_write) flags |= IBV_ACCESS_LOCAL_WRITE;
  // The NIC writes into the region: local write must be granted with it (a
  // writable window needs it on its MR too).
  if (access.remote_write) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (windows) {
    // The MR's own key then gives no remote access at all. Binding pins the
    // pages writable (the kernel's ib_access_writable), whatever the access.
    if (access.remote_write || access.remote_read) flags |= IBV_ACCESS_MW_BIND;
    return flags;
  }
  return flags | WindowAccess(access);
}

int VerbsRegistration::WindowAccess(const memory::Access& access) {
  return (access.remote_write ? IBV_ACCESS_REMOTE_WRITE : 0) |
         (access.remote_read ? IBV_ACCESS_REMOTE_READ : 0);
}

absl::StatusOr<std::unique_ptr<VerbsRegistration>> VerbsRegistration::Create(
    std::vector<std::shared_ptr<VerbsContext>> contexts, std::byte* base, uint64_t size,
    const memory::Access& access, bool local_write, bool windows, uint64_t chunk, int threads,
    std::shared_ptr<std::atomic<int64_t>> open_mrs) {
  chunk = std::max<uint64_t>(chunk, 4096);
  const size_t count = static_cast<size_t>((size + chunk - 1) / chunk);
  const size_t devices = contexts.size();
  const int flags = AccessFlags(access, local_write, windows);
  std::vector<std::vector<IbvMr>> mrs(devices);
  for (auto& per_device : mrs) per_device.resize(count);
  // Every (device, chunk) is one job: the threads pin on every device at once.
  std::atomic<size_t> next{0};
  const size_t jobs = count * devices;
  Mutex mu;
  absl::Status first_error;
  auto worker = [&] {
    for (size_t job; (job = next.fetch_add(1)) < jobs;) {
      const size_t d = job / count;
      const size_t i = job % count;
      const uint64_t offset = i * chunk;
      const uint64_t length = std::min(chunk, size - offset);
      ibv_mr* mr = ibv_reg_mr(contexts[d]->pd.get(), base + offset, length, flags);
      if (mr == nullptr) {
        const int err = errno;
        MutexLock lock(&mu);
        if (first_error.ok()) {
          first_error = VerbsError(absl::StrCat("ibv_reg_mr(", FormatBytes(length), " at offset ",
                                                offset, " on ", contexts[d]->port.device, ")"),
                                   err);
        }
        next.store(jobs);  // stop the others early
        return;
      }
      mrs[d][i].reset(mr);
    }
  };
  const int n = std::clamp<int>(threads, 1, static_cast<int>(std::max<size_t>(jobs, 1)));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& thread : pool) thread.join();
  if (!first_error.ok()) return first_error;  // `mrs` deregisters what did succeed
  open_mrs->fetch_add(static_cast<int64_t>(jobs));
  return std::unique_ptr<VerbsRegistration>(new VerbsRegistration(
      std::move(contexts), base, size, chunk, std::move(mrs), std::move(open_mrs)));
}

VerbsRegistration::VerbsRegistration(std::vector<std::shared_ptr<VerbsContext>> contexts,
                                     std::byte* base, uint64_t size, uint64_t chunk,
                                     std::vector<std::vector<IbvMr>> mrs,
                                     std::shared_ptr<std::atomic<int64_t>> open_mrs)
    : contexts_(std::move(contexts)),
      base_(base),
      size_(size),
      chunk_(chunk),
      mrs_(std::move(mrs)),
      open_mrs_(std::move(open_mrs)) {}

VerbsRegistration::~VerbsRegistration() {
  RevokeWindows();
  open_mrs_->fetch_sub(static_cast<int64_t>(mr_count()));
}

size_t VerbsRegistration::mr_count() const {
  size_t n = 0;
  for (const auto& per_device : mrs_) n += per_device.size();
  return n;
}

std::vector<uint32_t> VerbsRegistration::rkeys(uint32_t device) const {
  std::vector<uint32_t> keys;
  keys.reserve(mrs_[device].size());
  for (const IbvMr& mr : mrs_[device]) keys.push_back(mr->rkey);
  return keys;
}


std::vector<WindowTarget> VerbsRegistration::WindowTargets(uint32_t device) const {
  std::vector<WindowTarget> targets;
  for (const IbvMr& mr : mrs_[device]) {
    targets.push_back(WindowTarget{mr.get(), reinterpret_cast<uint64_t>(mr->addr), mr->length});
  }
  return targets;
}

void VerbsRegistration::KeepWindows(std::shared_ptr<MemoryWindows> windows) const {
  MutexLock lock(&windows_mu_);
  // Those released already (their link closed) need no keeping.
  windows_.erase(std::remove_if(windows_.begin(), windows_.end(),
                                [](const auto& w) { return !w->usable(); }),
                 windows_.end());
  windows_.push_back(std::move(windows));
}

void VerbsRegistration::RevokeWindows() const {
  std::vector<std::shared_ptr<MemoryWindows>> windows;
  {
    MutexLock lock(&windows_mu_);
    windows.swap(windows_);
  }
  // Released, not just dropped: a bind on its way still holds them.
  for (const auto& w : windows) w->Release();
}

}  // namespace xferd::transport::verbs
