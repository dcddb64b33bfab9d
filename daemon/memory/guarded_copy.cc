#include "daemon/memory/guarded_copy.h"

#include <unistd.h>

namespace xferd::memory {

ssize_t GuardedCopy(const iovec* to, size_t to_count, const iovec* from, size_t from_count) {
  // A process may always read and write its own memory this way: the
  // ptrace access check passes for the calling thread group.
  return ::process_vm_readv(::getpid(), to, to_count, from, from_count, 0);
}

}  // namespace xferd::memory
