// SpinWindow: how long an idle poller busy-polls before it sleeps, adapted to
// the gaps between its work the way KVM adapts halt_poll_ns.
#pragma once

#include <algorithm>
#include <chrono>

namespace xferd::engine {

// A poller that slept and was woken by work within `max` would have caught
// that work spinning, without paying a wake-up (a context switch; tens of µs
// on a busy host): the window doubles, up to `max`. A sleep longer than `max`
// is a gap no spin should cover: the window returns to `base`, so a daemon
// that goes idle spins at most `max` once, then `base` again. A `base` of
// zero never grows (the lowest CPU, as configured); a `max` at or below
// `base` keeps the window at `base`.
class SpinWindow {
 public:
  using Duration = std::chrono::nanoseconds;

  SpinWindow(Duration base, Duration max) : base_(base), max_(std::max(base, max)), now_(base) {}

  Duration now() const { return now_; }

  // The poller slept this long before something woke it.
  void Slept(Duration slept) { now_ = slept > max_ ? base_ : std::min(max_, now_ * 2); }

 private:
  const Duration base_;
  const Duration max_;
  Duration now_;
};

}  // namespace xferd::engine
