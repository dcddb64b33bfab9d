// Reads one submission entry of a client's ring into a request for the
// engine. The client may write its memory at any moment: the entry itself is
// copied out before this sees it, and the arrays it points at are bounded,
// then copied out once; nothing in shared memory is read twice or trusted.
// This is the part the ring fuzzer drives.
#pragma once

#include <cstddef>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/base/ring_layout.h"
#include "daemon/engine/transfer.h"
#include "daemon/rings/name_table.h"

namespace xferd::rings {

struct RingRequest {
  engine::TransferSpec spec;
  bool queued_notice = false;  // kFlagQueuedNotice
};

// Where an entry's arrays may be: the SQ slots after it (copied out with the
// entry, ext * 64 bytes) and the session's buffer area (shared memory).
struct EntryArrays {
  absl::Span<const std::byte> inline_slots;
  absl::Span<const std::byte> buffer;
};

// The request `entry` (already copied out) asks for, its names looked up in
// `names` and its arrays copied out of `arrays`. INVALID_ARGUMENT naming the
// field for anything malformed: an unknown opcode, form or flag, a reserved
// field not 0, a handle never interned, arrays beyond their area or of more
// blocks than a request may have. What the engine checks anyway (ranges,
// overlaps, slice sizes) is left to it.
absl::StatusOr<RingRequest> ReadEntry(const Sqe& entry, const EntryArrays& arrays,
                                      const NameTable& names);

}  // namespace xferd::rings
