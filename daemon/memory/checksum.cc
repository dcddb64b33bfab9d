#include "daemon/memory/checksum.h"

#include <isa-l/crc64.h>
#include <sys/uio.h>

#include <algorithm>

#include "daemon/memory/guarded_copy.h"
#include "daemon/memory/region.h"

namespace xferd::memory {
namespace {

// The bounce buffer of a guarded checksum: in cache, and one per thread so
// that no lock is taken.
constexpr size_t kBounceBytes = 64 << 10;

}  // namespace

uint64_t BlockChecksum(const std::byte* data, size_t length, uint64_t seed) {
  return crc64_ecma_refl(seed, reinterpret_cast<const uint8_t*>(data), length);
}

bool RegionChecksum(const Region& region, const std::byte* data, size_t length, uint64_t* sum) {
  if (!region.can_lose_memory()) {
    *sum = BlockChecksum(data, length);
    return true;
  }
  thread_local std::byte bounce[kBounceBytes];
  uint64_t crc = 0;
  while (length > 0) {
    const size_t take = std::min(length, kBounceBytes);
    const iovec to{bounce, take};
    const iovec from{const_cast<std::byte*>(data), take};
    if (GuardedCopy(&to, 1, &from, 1) != static_cast<ssize_t>(take)) return false;
    crc = crc64_ecma_refl(crc, reinterpret_cast<const uint8_t*>(bounce), take);
    data += take;
    length -= take;
  }
  *sum = crc;
  return true;
}

}  // namespace xferd::memory
