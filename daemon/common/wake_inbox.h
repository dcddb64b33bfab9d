// A command inbox with a wake-up: any thread hands commands (or a bare wake)
// to one consumer thread, which drains them at the start of every pass and,
// when idle, sleeps in poll() on fd() beside its other descriptors. Pollers
// take their transfers through one; the TCP and verbs workers take the lane
// commands of control threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "daemon/base/mutex.h"
#include "daemon/common/unique_fd.h"

namespace xferd {

// The wake-up half of an inbox, the same for every command type: an eventfd
// and the sleeping / wake-pending handshake.
//
// Why no wake is lost. A producer stores pending_, then loads sleeping_; the
// consumer, about to sleep, stores sleeping_, then loads pending_. All four
// accesses are seq_cst, so they fall in one total order and at least one side
// sees the other's store (Dekker's pattern): either the consumer sees the
// wake and does not sleep, or the producer sees it asleep and writes the
// eventfd, which the consumer's poll() watches. So a wake that lands after a
// pass began but before the sleep stops the sleep. Commands are queued
// before the wake, so a pass that takes the wake also finds them.
//
// What a race costs. A producer that saw sleeping_ may write the eventfd just
// after the consumer woke for another reason and read the count; the count
// then stays, and the next sleep returns at once. The pass after every sleep
// reads the count away, so the cost is one extra pass, never a busy loop.
class WakeSignal {
 public:
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  // The eventfd the consumer sleeps on (POLLIN, or in its epoll set).
  int fd() const { return fd_.get(); }

  // Any thread: wakes the consumer if it sleeps, and keeps it from falling
  // asleep before its next pass. Never blocks; a syscall only when it sleeps.
  void Wake();

  // Consumer thread, idle: true if it may now sleep on fd(); false if a wake
  // came since its pass began (do another pass instead). A true commits it to
  // sleep and to begin a pass when it wakes: call this last of every check
  // that can refuse the sleep.
  bool PrepareToSleep();

  // Any thread, for stats: from a true PrepareToSleep() until the next pass.
  bool sleeping() const { return sleeping_.load(std::memory_order_relaxed); }

 protected:
  explicit WakeSignal(UniqueFd fd) : fd_(std::move(fd)) {}
  ~WakeSignal() = default;
  // RESOURCE_EXHAUSTED if the process is out of descriptors.
  static absl::StatusOr<UniqueFd> MakeEventFd();
  // Consumer thread, first thing in a pass: ends a sleep (reads the eventfd's
  // count) and takes the pending wake. True if there was one.
  bool BeginPass();
  // A wake without the eventfd: a pass that begins sees it; a sleeping
  // consumer does not (PushDeferred's caller wakes it later).
  void MarkPending() { pending_.store(true); }

 private:
  const UniqueFd fd_;  // eventfd, non-blocking
  std::atomic<bool> pending_{false};
  std::atomic<bool> sleeping_{false};  // written by the consumer only
};

// A bounded queue of T plus its WakeSignal. One consumer thread drains it.
template <typename T>
class WakeInbox final : public WakeSignal {
 public:
  // No bound: Push grows the queue (for producers on control threads only).
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

  // At most `capacity` commands wait at once; room for them is reserved here,
  // so neither Push nor Drain allocates. RESOURCE_EXHAUSTED without an eventfd.
  static absl::StatusOr<std::unique_ptr<WakeInbox>> Create(size_t capacity) {
    absl::StatusOr<UniqueFd> fd = MakeEventFd();
    if (!fd.ok()) return fd.status();
    return std::unique_ptr<WakeInbox>(new WakeInbox(*std::move(fd), capacity));
  }

  // Any thread: queues `command` behind the others and wakes the consumer.
  // False, dropping the command, when `capacity` commands already wait.
  [[nodiscard]] bool Push(T command) {
    if (!Queue(std::move(command))) return false;
    Wake();
    return true;
  }

  // Any thread: queues `command` like Push but wakes no one yet: the caller
  // promises a Wake() soon (several commands then cost one wake-up). A pass
  // that begins meanwhile takes it anyway.
  [[nodiscard]] bool PushDeferred(T command) {
    if (!Queue(std::move(command))) return false;
    MarkPending();
    return true;
  }

  // Consumer thread (or, once it has stopped, the thread that joined it):
  // begins a pass. Ends a sleep, takes a pending wake and calls `fn(T&)` on
  // each queued command in order, outside the lock: `fn` may Push (to this
  // inbox too), but not Drain. Commands are destroyed after `fn` saw them.
  // Returns how many there were.
  template <typename Fn>
  size_t Drain(Fn&& fn) {
    if (!BeginPass()) return 0;  // every Push wakes after it queues
    {
      MutexLock lock(&mu_);
      draining_.swap(queue_);
    }
    for (T& command : draining_) fn(command);
    const size_t n = draining_.size();
    draining_.clear();  // keeps the capacity: both buffers stay reserved
    return n;
  }

 private:
  bool Queue(T command) {
    MutexLock lock(&mu_);
    if (queue_.size() >= capacity_) return false;
    queue_.push_back(std::move(command));
    return true;
  }

  WakeInbox(UniqueFd fd, size_t capacity) : WakeSignal(std::move(fd)), capacity_(capacity) {
    if (capacity_ == kUnbounded) return;
    MutexLock lock(&mu_);
    queue_.reserve(capacity_);
    draining_.reserve(capacity_);
  }

  const size_t capacity_;
  Mutex mu_;
  std::vector<T> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<T> draining_;  // consumer only; swapped with queue_ under mu_
};

}  // namespace xferd
