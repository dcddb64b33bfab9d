// When a broken device pair of a live link may try to rejoin (come back
// into service without a new handshake): a few attempts, backing off, so a
// peer whose device stays down is not asked forever; a port that comes back
// (its device's activation count moved) or a rejoin that worked starts
// afresh. Pure logic, unit-tested without a device.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace xferd::transport::verbs {

class RejoinBudget {
 public:
  // Attempts per outage, and the wait before the second one (doubling after).
  static constexpr uint32_t kAttempts = 5;
  static constexpr absl::Duration kFirstBackoff = absl::Seconds(1);

  // True if an attempt may start at `now`. `activations`: how often the
  // local port became ACTIVE so far; a new value restores every attempt.
  bool Due(absl::Time now, uint32_t activations);
  // An attempt started at `now`: counts it and schedules the next one.
  void Tried(absl::Time now);
  // The pair is back in service: the next outage gets every attempt again.
  void Succeeded();

  uint32_t attempts() const { return attempts_; }

 private:
  uint32_t attempts_ = 0;
  uint32_t activations_ = 0;
  absl::Time next_ = absl::InfinitePast();
};

}  // namespace xferd::transport::verbs
