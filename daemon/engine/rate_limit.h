// A byte rate shared by threads without a lock: a tenant's bandwidth cap
// (docs/tenants.md), which every poller charges for the ops it posts.
// GCRA (the generic cell rate algorithm): one atomic "theoretical arrival
// time" that each charge moves forward by the bytes' time at the rate; a
// poster may go while that time is less than `burst` ahead of now.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace xferd::engine {

class RateLimit {
 public:
  // 0 bytes per second: no limit.
  RateLimit(uint64_t bytes_per_second, absl::Duration burst)
      : bytes_per_second_(bytes_per_second), burst_ns_(absl::ToInt64Nanoseconds(burst)) {}

  bool limited() const { return bytes_per_second_ != 0; }
  uint64_t bytes_per_second() const { return bytes_per_second_; }

  // Nanoseconds from `now_ns` (a steady clock's) until posting may resume;
  // 0: now. Any thread.
  int64_t WaitNs(int64_t now_ns) const {
    return std::max<int64_t>(0, tat_ns_.load(std::memory_order_relaxed) - burst_ns_ - now_ns);
  }
  // Bytes that may be posted at `now_ns` (a batch stops once past them):
  // at most the burst's worth, however long it was idle.
  uint64_t Allowance(int64_t now_ns) const {
    const int64_t tat = std::max(tat_ns_.load(std::memory_order_relaxed), now_ns);
    const int64_t ahead = now_ns + burst_ns_ - tat;
    if (ahead <= 0) return 0;
    return static_cast<uint64_t>(static_cast<double>(ahead) *
                                 static_cast<double>(bytes_per_second_) / 1e9);
  }

  // `bytes` were posted at `now_ns`. Any thread, lock-free.
  void Charge(uint64_t bytes, int64_t now_ns) {
    const int64_t cost = static_cast<int64_t>(static_cast<double>(bytes) * 1e9 /
                                              static_cast<double>(bytes_per_second_));
    int64_t tat = tat_ns_.load(std::memory_order_relaxed);
    while (!tat_ns_.compare_exchange_weak(tat, std::max(tat, now_ns) + cost,
                                          std::memory_order_relaxed)) {
    }
  }

 private:
  const uint64_t bytes_per_second_;
  const int64_t burst_ns_;
  std::atomic<int64_t> tat_ns_{0};
};

}  // namespace xferd::engine
