// Memory the daemon shares with clients through a descriptor: a memfd sized
// and then sealed against shrinking, growing and further sealing before any
// other process can see it. Whoever the descriptor is handed to can read and
// write the bytes but never change the size, so no access of the daemon's to
// the memory can fault (SIGBUS) or lose the pages it registered.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/common/unique_fd.h"

namespace xferd::memory {

// A memfd named `name` (shown in /proc/<pid>/fd as "memfd:<name>") of `size`
// bytes, sealed F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, close-on-exec.
// With `reserve`, its pages are allocated now, so a host out of memory fails
// here rather than at a later access. Errors (ErrnoStatus): RESOURCE_EXHAUSTED
// (out of memory or descriptors), INVALID_ARGUMENT otherwise; the message
// says which step failed and why.
absl::StatusOr<UniqueFd> CreateSealedMemfd(absl::string_view name, uint64_t size, bool reserve);

// Allocates the blocks of a file (a memfd's pages) up front: a store into a
// MAP_SHARED page whose block cannot be allocated raises SIGBUS, so a full
// disk or memory must fail here, at registration, never in a transfer.
// Filesystems without fallocate pass. `what` names the file in the error.
absl::Status ReserveBlocks(int fd, uint64_t size, absl::string_view what);

}  // namespace xferd::memory
