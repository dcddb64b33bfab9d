// The one way the daemon's CPU copies into or out of memory that another
// process can take away: a file region's pages go when someone truncates
// its file, and a plain load or store there would kill the daemon (SIGBUS).
// The kernel copies instead (process_vm_readv on the daemon's own pid), and
// reports such a page as a short count or EFAULT, for that copy alone.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>

namespace xferd::memory {

// Copies the bytes of `from` (in order) into `to` (in order), as far as both
// go, all in the daemon's own memory. Returns the bytes copied: fewer than
// asked when a page of either side is gone (the copy stops there), or -1
// with errno (EFAULT: the first page already; EINVAL, ENOMEM: bad lists).
// Any thread; no signal handler, no shared state. Why not a SIGBUS handler
// with sigsetjmp: the copy may be inside a library (OpenSSL) whose state a
// jump out of it would leave broken, and a handler is process-wide state.
ssize_t GuardedCopy(const iovec* to, size_t to_count, const iovec* from, size_t from_count);

}  // namespace xferd::memory
