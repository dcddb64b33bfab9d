// The calling thread's time slice under the kernel's fair scheduler: a
// thread that asks for a short one is let preempt a running thread when it
// wakes (EEVDF, Linux 6.12 and later), so a poller woken on a busy host runs
// within about its slice instead of after the running thread's.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xferd {

// Asks for `slice` (the kernel clamps it to 0.1-100 ms) and keeps the
// thread's policy and nice value. True if the kernel honours it, false if it
// took the request but keeps no slice per thread (kernels before 6.12);
// an error if it refused the call.
absl::StatusOr<bool> SetThreadSlice(absl::Duration slice);

}  // namespace xferd
