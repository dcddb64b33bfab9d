// A region registry for fuzz targets that take peer-controlled region ids,
// offsets and lengths: one region the fuzzing peer may write, one it may read
// (remote_read, not remote_write), and guard regions it may neither write
// nor read (no access; ACL without it), the last three filled with a pattern.
// The bytes between the writable and readable regions' ends and their pages'
// ends are poisoned under AddressSanitizer, so a write or a read past the
// region is a crash even when it touches mapped memory.
#pragma once

#include <cstdint>
#include <memory>

#include "daemon/memory/region_registry.h"

namespace xferd::fuzz {

// The node id of the peer the fuzz input pretends to come from.
inline constexpr char kFuzzPeer[] = "fuzz-peer";

class FuzzRegions {
 public:
  // Built on first use, kept for the process (libFuzzer runs many inputs).
  static FuzzRegions& Get();

  const memory::RegionRegistry& registry() const { return registry_; }
  // The region the fuzzing peer may write: id 1, not page-sized.
  memory::Region& writable() const { return *writable_; }
  bool Writable(const memory::Region& region) const { return &region == writable_.get(); }
  // The region the fuzzing peer may read: id 4, not page-sized, byte i
  // holding ReadableByte(i).
  static constexpr uint32_t kReadableId = 4;
  static constexpr uint64_t kReadableBytes = 16 * 1024 - 36;
  static uint8_t ReadableByte(uint64_t offset) { return static_cast<uint8_t>(offset * 13 + 5); }
  // Aborts unless every guard region still holds its pattern.
  void CheckGuards() const;

 private:
  FuzzRegions();

  memory::RegionRegistry registry_;
  std::shared_ptr<memory::Region> writable_;
  std::shared_ptr<memory::Region> read_only_;
  std::shared_ptr<memory::Region> other_peers_;
  std::shared_ptr<memory::Region> readable_;
};

}  // namespace xferd::fuzz
