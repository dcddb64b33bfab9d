#include "tests/fuzz/fuzz_regions.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tests/fuzz/fuzz_check.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XFERD_FUZZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define XFERD_FUZZ_ASAN 1
#endif
#ifdef XFERD_FUZZ_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace xferd::fuzz {
namespace {

// Odd-sized, so the rest of its last page can be poisoned.
constexpr uint64_t kWritableBytes = 64 * 1024 - 100;
constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kGuardBytes = 8192;
constexpr std::byte kPattern{0xA5};

std::shared_ptr<memory::Region> Register(memory::RegionRegistry& registry, std::string name,
                                         uint64_t size, bool remote_write,
                                         std::vector<std::string> acl) {
  memory::RegionSpec spec;
  spec.name = std::move(name);
  spec.size = size;
  spec.access.remote_write = remote_write;
  spec.allowed_peers = std::move(acl);
  absl::StatusOr<std::shared_ptr<memory::Region>> region = registry.Register(spec, nullptr);
  FUZZ_CHECK(region.ok());
  return *std::move(region);
}

bool HoldsPattern(const memory::Region& region) {
  for (uint64_t i = 0; i < region.size(); ++i) {
    if (region.data()[i] != kPattern) return false;
  }
  return true;
}

}  // namespace

FuzzRegions& FuzzRegions::Get() {
  static FuzzRegions* regions = new FuzzRegions();
  return *regions;
}

FuzzRegions::FuzzRegions()
    : registry_(memory::RegistryOptions{}),
      writable_(Register(registry_, "writable", kWritableBytes, true, {})),
      read_only_(Register(registry_, "read-only", kGuardBytes, false, {})),
      other_peers_(Register(registry_, "other-peers", kGuardBytes, true, {"someone-else"})) {
  FUZZ_CHECK(writable_->id() == 1);
  std::memset(read_only_->data(), static_cast<int>(kPattern), kGuardBytes);
  std::memset(other_peers_->data(), static_cast<int>(kPattern), kGuardBytes);
#ifdef XFERD_FUZZ_ASAN
  const uint64_t tail = kPageBytes - kWritableBytes % kPageBytes;
  ASAN_POISON_MEMORY_REGION(writable_->data() + kWritableBytes, tail);
#endif
}

void FuzzRegions::CheckGuards() const {
  FUZZ_CHECK(HoldsPattern(*read_only_));
  FUZZ_CHECK(HoldsPattern(*other_peers_));
}

}  // namespace xferd::fuzz
