// A region registry for fuzz targets that take peer-controlled region ids,
// offsets and lengths: one region the fuzzing peer may write, and guard
// regions it may not (read-only; ACL without it) filled with a pattern. The
// bytes between the writable region's end and its page's end are poisoned
// under AddressSanitizer, so a write past the region is a crash even when it
// lands in mapped memory.
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
  // Aborts unless every guard region still holds its pattern.
  void CheckGuards() const;

 private:
  FuzzRegions();

  memory::RegionRegistry registry_;
  std::shared_ptr<memory::Region> writable_;
  std::shared_ptr<memory::Region> read_only_;
  std::shared_ptr<memory::Region> other_peers_;
};

}  // namespace xferd::fuzz
