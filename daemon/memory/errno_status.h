// A failed system call as a Status whose code says what kind of failure it
// was (missing, denied, out of resources, ...) and whose message says what
// was attempted.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xferd::memory {

// `what` names the attempt, e.g. "cannot open /data/x.bin".
absl::Status ErrnoStatus(int err, absl::string_view what);

}  // namespace xferd::memory
