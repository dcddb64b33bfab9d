// The checksum of a block of a verified transfer: CRC-64/XZ (the ECMA-182
// polynomial, reflected, as xz and Mooncake's store use), by ISA-L, which
// folds it with carry-less multiplies at memory speed (docs/integrity.md
// has the measurements that chose it). A CRC of this degree detects every
// error of up to 64 adjacent bits and every odd count of flipped bits, and
// misses other corruption with odds of 2^-64.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xferd::memory {

class Region;

// Of `length` bytes at `data`, plain memory; with `seed` the checksum of
// the bytes before them, of both together (a block checksummed in pieces).
// Any thread.
uint64_t BlockChecksum(const std::byte* data, size_t length, uint64_t seed = 0);

// Of `length` bytes at `data` inside `region`: for a region whose memory can
// go (a file region) through guarded copies (guarded_copy.h) into a bounce
// buffer, never a load that could kill the daemon. False when a page is
// gone (then the region's own fault path fails the op). Any thread.
bool RegionChecksum(const Region& region, const std::byte* data, size_t length, uint64_t* sum);

}  // namespace xferd::memory
