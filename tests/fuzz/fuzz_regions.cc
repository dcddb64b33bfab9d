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
                                         std::vector<std::string> acl, bool remote_read = false) {
  memory::RegionSpec spec;
  spec.name = std::move(name);
  spec.size = size;
  spec.access.remote_write = remote_write;
  spec.access.remote_read = remote_read;
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

void PoisonTail(const memory::Region& region) {
#ifdef XFERD_FUZZ_ASAN
  const uint64_t tail = kPageBytes - region.size() % kPageBytes;
  ASAN_POISON_MEMORY_REGION(region.data() + region.size(), tail);
#else
  (void)region;
#endif
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
      other_peers_(Register(registry_, "other-peers", kGuardBytes, true, {"someone-else"})),
      readable_(Register(registry_, "readable", kReadableBytes, false, {}, true)) {
  for (uint64_t i = 0; i < kReadableBytes; ++i) readable_->data()[i] = std::byte{ReadableByte(i)};
  FUZZ_CHECK(writable_->id() == 1 && readable_->id() == kReadableId);
  std::memset(read_only_->data(), static_cast<int>(kPattern), kGuardBytes);
  std::memset(other_peers_->data(), static_cast<int>(kPattern), kGuardBytes);
  PoisonTail(*writable_);
  PoisonTail(*readable_);
}

void FuzzRegions::CheckGuards() const {
  FUZZ_CHECK(HoldsPattern(*read_only_));
  FUZZ_CHECK(HoldsPattern(*other_peers_));
  for (uint64_t i = 0; i < kReadableBytes; ++i) {
    FUZZ_CHECK(readable_->data()[i] == std::byte{ReadableByte(i)});
  }
}

}  // namespace xferd::fuzz
