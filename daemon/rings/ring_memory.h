// The shared memory of one local client's request rings (ring_layout.h): a
// memfd laid out and sealed by the daemon (it can neither shrink nor grow, so
// no access of the daemon's can fault), mapped here, and the two doorbells.
// The local socket hands the three descriptors to the client; the daemon
// reads from the mapping only what it copies out first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/base/ring_layout.h"
#include "daemon/common/unique_fd.h"

namespace xferd::rings {

struct RingSizes {
  uint32_t sq_entries = 0;
  uint32_t cq_entries = 0;
  uint64_t buffer_bytes = 0;
};

// Limits on what a client may ask for (local.proto, OpenRingsRequest).
inline constexpr uint32_t kMaxSqEntries = 4096;
inline constexpr uint32_t kMaxCqEntries = 16384;
inline constexpr uint64_t kMaxBufferBytes = uint64_t{256} << 20;
inline constexpr uint32_t kDefaultSqEntries = 256;
inline constexpr uint64_t kDefaultBufferBytes = uint64_t{16} << 20;

// Fills defaults (0), rounds entries up to powers of two and the buffer to
// pages, and checks the limits: INVALID_ARGUMENT naming the field.
absl::StatusOr<RingSizes> ChooseSizes(uint32_t sq_entries, uint32_t cq_entries,
                                      uint64_t buffer_bytes);

class RingMemory {
 public:
  // The memfd (sealed against shrinking and growing), its mapping with the
  // header page filled in, and the doorbells. RESOURCE_EXHAUSTED when the
  // process is out of descriptors or memory maps.
  static absl::StatusOr<std::unique_ptr<RingMemory>> Create(const RingSizes& sizes);
  ~RingMemory();

  RingMemory(const RingMemory&) = delete;
  RingMemory& operator=(const RingMemory&) = delete;

  const RingSizes& sizes() const { return sizes_; }
  const Geometry& geometry() const { return geometry_; }
  int memory_fd() const { return memory_fd_.get(); }
  // Written by the client after it submits while the daemon is idle.
  int submit_fd() const { return submit_fd_.get(); }
  // Written by the daemon after it completes while the client waits.
  int complete_fd() const { return complete_fd_.get(); }

  // The mapping, by area. Everything the client writes is untrusted: read
  // an entry once, into memory of the daemon's own, before looking at it.
  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  const Sqe* sq() const { return reinterpret_cast<const Sqe*>(base_ + geometry_.sq_offset); }
  Cqe* cq() const { return reinterpret_cast<Cqe*>(base_ + geometry_.cq_offset); }
  char* message(uint64_t position) const {
    return reinterpret_cast<char*>(base_ + geometry_.messages_offset) +
           (position & (geometry_.cq_entries - 1)) * kMessageBytes;
  }
  const std::byte* buffer() const { return base_ + geometry_.buffer_offset; }

 private:
  RingMemory(RingSizes sizes, Geometry geometry, UniqueFd memory, std::byte* base,
             UniqueFd submit, UniqueFd complete);

  const RingSizes sizes_;
  const Geometry geometry_;
  const UniqueFd memory_fd_;
  std::byte* const base_;
  const UniqueFd submit_fd_;
  const UniqueFd complete_fd_;
};

}  // namespace xferd::rings
