// Waiting in a test for what another thread does: a condition polled with a
// bound, rather than a fixed sleep (too short on a loaded host, wasted time
// on a quiet one, and a test that passes whether or not it happened).
#pragma once

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace xferd::testing {

// True once `done()` holds (checked every millisecond); false if it still
// does not after `timeout`.
inline bool WaitUntil(const std::function<bool()>& done,
                      absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

}  // namespace xferd::testing
