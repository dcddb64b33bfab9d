// Resource usage of this process, read from /proc/self, for Stats and leak
// checks in tests (fd and memory counts before and after a fault).
#pragma once

#include <cstdint>

namespace xferd {

struct ProcessStats {
  uint64_t resident_bytes = 0;       // VmRSS
  uint64_t peak_resident_bytes = 0;  // VmHWM
  uint32_t open_fds = 0;
  uint32_t threads = 0;
};

// Never fails: fields it cannot read stay 0.
ProcessStats ReadProcessStats();

}  // namespace xferd
