#include "daemon/transport/verbs/rejoin_budget.h"

namespace xferd::transport::verbs {

bool RejoinBudget::Due(absl::Time now, uint32_t activations) {
  if (activations != activations_) {
    // The port came back since the last attempts: whatever failed before
    // may work now.
    activations_ = activations;
    Succeeded();
  }
  return attempts_ < kAttempts && now >= next_;
}

void RejoinBudget::Tried(absl::Time now) {
  next_ = now + kFirstBackoff * (1 << attempts_);
  ++attempts_;
}

void RejoinBudget::Succeeded() {
  attempts_ = 0;
  next_ = absl::InfinitePast();
}

}  // namespace xferd::transport::verbs
