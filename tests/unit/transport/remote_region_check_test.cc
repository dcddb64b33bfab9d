#include "daemon/transport/verbs/remote_region_check.h"

#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace xferd::transport::verbs {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

RemoteRegion Region(uint64_t size, uint64_t chunk, size_t rkeys) {
  return RemoteRegion{7, size, 0x10000, chunk, std::vector<uint32_t>(rkeys, 42)};
}

TEST(RemoteRegionCheckTest, AcceptsOneRkeyPerChunk) {
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(kGiB, kGiB, 1)).ok());
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(kGiB + 1, kGiB, 2)).ok());
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(3 * kGiB, kGiB, 3)).ok());
  // A chunk below kMinMrChunk is fine when it covers the whole region.
  EXPECT_TRUE(CheckRemoteRegionKeys(Region(4096, 4096, 1)).ok());
}

TEST(RemoteRegionCheckTest, RefusesMalformedKeys) {
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB + 1, kGiB, 1)).ok());  // too few
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB, kGiB, 2)).ok());      // too many
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(0, kGiB, 0)).ok());         // empty region
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kGiB, 0, 0)).ok());         // no chunk size
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(2 * kGiB, 4096, 2 * kGiB / 4096)).ok());
  RemoteRegion no_addr = Region(kGiB, kGiB, 1);
  no_addr.addr = 0;
  EXPECT_FALSE(CheckRemoteRegionKeys(no_addr).ok());
}

// The datapath indexes rkeys[offset / mr_chunk_bytes] for offsets below
// size: rounding the chunk count up must not wrap around for huge sizes.
TEST(RemoteRegionCheckTest, HugeSizeNeedsItsRkeys) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax, kGiB, 0)).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax, kMax, 0)).ok());
  RemoteRegion whole_space = Region(kMax, kMax, 1);
  whole_space.addr = 1;  // bytes 1 .. 2^64-1
  EXPECT_TRUE(CheckRemoteRegionKeys(whole_space).ok());
  EXPECT_FALSE(CheckRemoteRegionKeys(Region(kMax - kGiB + 2, kGiB, 0)).ok());
}

// The region must not wrap around the peer's address space.
TEST(RemoteRegionCheckTest, RefusesAddressWrap) {
  RemoteRegion r = Region(kGiB, kGiB, 1);
  r.addr = std::numeric_limits<uint64_t>::max() - 4096;
  EXPECT_FALSE(CheckRemoteRegionKeys(r).ok());
}

}  // namespace
}  // namespace xferd::transport::verbs
