// Process-wide logging setup on spdlog: text or JSON lines on stderr (journald
// captures it under systemd). Call once from main before any thread starts.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xferd {

// level: trace|debug|info|warn|error. json: one JSON object per line with the
// message escaped, so log shippers can parse it. INVALID_ARGUMENT on a bad level.
absl::Status SetupLogging(absl::string_view level, bool json);

}  // namespace xferd
