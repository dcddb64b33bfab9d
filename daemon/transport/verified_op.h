// The two sides of a verified op (DataOp::checksums, docs/integrity.md),
// for transports that check in their own data path: the source's checksums
// as its blocks go, and the destination's check of what landed.
#pragma once

#include <sys/uio.h>

#include <cstdint>

#include "daemon/transport/transport_types.h"

namespace xferd::transport {

// The source's checksum of each of `count` blocks about to be sent (in
// `region`, or plain memory when it is null), into `sums`; 0 for one whose
// page is gone (its copy fails the op there too). Any thread.
void TakeChecksums(const memory::Region* region, const iovec* pieces, uint32_t count,
                   uint64_t* sums);

// Whether each of `count` landed blocks (in `region`, or plain memory when
// it is null) matches its source's checksum in `expected`; otherwise which
// differ, in `mismatch` (its `checksums` is left to the caller). A page of
// a file region gone meanwhile counts as a difference. Any thread.
bool CheckLanded(const memory::Region* region, const iovec* landed, uint32_t count,
                 const uint64_t* expected, ChecksumMismatch* mismatch);

// CheckLanded for blocks whose checksums were taken when they landed
// (TakeChecksums), before the source's were known.
bool MatchLanded(const uint64_t* landed, uint32_t count, const uint64_t* expected,
                 ChecksumMismatch* mismatch);

}  // namespace xferd::transport
