#include "daemon/common/thread_slice.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xferd {
namespace {

// The kernel's struct sched_attr (SCHED_ATTR_SIZE_VER1). Its uapi header
// redefines glibc's sched_param, and glibc 2.36 has neither the struct nor
// the calls' wrappers.
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;  // the fair policies' slice, in ns (Linux 6.12+)
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};
static_assert(sizeof(SchedAttr) == 56, "SCHED_ATTR_SIZE_VER1");

int GetAttr(SchedAttr& attr) {
  return static_cast<int>(::syscall(SYS_sched_getattr, 0, &attr, sizeof(attr), 0));
}

int SetAttr(SchedAttr& attr) {
  return static_cast<int>(::syscall(SYS_sched_setattr, 0, &attr, 0));
}

}  // namespace

absl::StatusOr<bool> SetThreadSlice(absl::Duration slice) {
  SchedAttr attr{};
  // Read first: sched_setattr sets the policy and the nice value too, and
  // the daemon may run niced (systemd's Nice=).
  if (GetAttr(attr) != 0) {
    return absl::InternalError(absl::StrCat("sched_getattr: ", std::strerror(errno)));
  }
  // For the fair policies, sched_runtime is the slice (ignored before 6.12).
  attr.sched_runtime = static_cast<uint64_t>(absl::ToInt64Nanoseconds(slice));
  attr.size = sizeof(attr);
  if (SetAttr(attr) != 0) {
    return absl::InternalError(absl::StrCat("sched_setattr: ", std::strerror(errno)));
  }
  SchedAttr now{};
  if (GetAttr(now) != 0) {
    return absl::InternalError(absl::StrCat("sched_getattr: ", std::strerror(errno)));
  }
  return now.sched_runtime != 0;
}

}  // namespace xferd
