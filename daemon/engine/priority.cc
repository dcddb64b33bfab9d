#include "daemon/engine/priority.h"

namespace xferd::engine {

const char* PriorityName(Priority p) {
  switch (p) {
    case Priority::kCritical:
      return "critical";
    case Priority::kNormal:
      return "normal";
    case Priority::kBulk:
      return "bulk";
    case Priority::kBackground:
      return "background";
  }
  return "unknown";
}

bool PriorityFromWire(uint32_t wire, Priority* out) {
  if (wire == 0) {
    *out = Priority::kNormal;
    return true;
  }
  if (wire > kPriorities) return false;
  *out = static_cast<Priority>(wire - 1);
  return true;
}

}  // namespace xferd::engine
