#include "daemon/common/wake_inbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xferd {

absl::StatusOr<UniqueFd> WakeSignal::MakeEventFd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd.valid()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create a wake-up eventfd: ", std::strerror(errno),
                     "; raise the daemon's descriptor limit (LimitNOFILE, ulimit -n)"));
  }
  return fd;
}

void WakeSignal::Wake() {
  // Store, then load, both seq_cst: see the class comment.
  pending_.store(true);
  if (sleeping_.load()) {
    const uint64_t one = 1;
    (void)!::write(fd_.get(), &one, sizeof(one));
  }
}

bool WakeSignal::PrepareToSleep() {
  sleeping_.store(true);
  if (!pending_.load()) return true;
  sleeping_.store(false);
  return false;
}

bool WakeSignal::BeginPass() {
  if (sleeping_.load(std::memory_order_relaxed)) {
    sleeping_.store(false);
    // Whoever saw us asleep may have written a count; leave none behind, or
    // every later sleep would return at once.
    uint64_t count;
    (void)!::read(fd_.get(), &count, sizeof(count));
  }
  // The relaxed load keeps a busy pass free of read-modify-writes. A wake it
  // misses stays set, and PrepareToSleep's seq_cst load sees it. The exchange
  // acquires what the producer queued before its wake.
  return pending_.load(std::memory_order_relaxed) && pending_.exchange(false);
}

}  // namespace xferd
