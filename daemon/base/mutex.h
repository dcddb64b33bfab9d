// xferd's mutex: std::mutex underneath, with Abseil's thread-safety
// annotations and absl::Mutex-like conditional waits (Await re-checks its
// condition whenever another thread releases the mutex).
//
// Why not absl::Mutex: Debian builds Abseil without ThreadSanitizer
// annotations, so TSan cannot see absl::Mutex synchronize and reports every
// access it guards as a race. std::mutex is pthread, which TSan intercepts.
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace xferd {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  // False if any thread, the caller included, holds it (glibc's trylock).
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    const bool wake = waiters_ > 0;
    mu_.unlock();
    if (wake) cv_.notify_all();
  }
  // Shared locking is exclusive underneath: every critical section here is
  // short, and readers rarely contend.
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { Lock(); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { Unlock(); }

  // With the mutex held, waits until `condition()` is true: it is checked
  // now and again whenever another thread unlocks. Returns with it held.
  template <typename Condition>
  void Await(Condition condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitWithDeadline(condition, absl::InfiniteFuture());
  }
  // As Await, but gives up at `deadline`; returns whether the condition held.
  template <typename Condition>
  bool AwaitWithDeadline(Condition condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    bool met = condition();
    while (!met) {
      if (deadline == absl::InfiniteFuture()) {
        cv_.wait(lock);
      } else if (cv_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout) {
        met = condition();
        break;
      }
      met = condition();
    }
    --waiters_;
    lock.release();  // still held: the caller's lock owns it
    return met;
  }
  template <typename Condition>
  bool AwaitWithTimeout(Condition condition, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(condition, absl::Now() + timeout);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiters_ = 0;  // threads in Await*, guarded by mu_
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) { mu_->ReaderLock(); }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace xferd
