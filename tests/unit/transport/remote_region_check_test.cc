#include "daemon/transport/verbs/remote_region_check.h"

#include <cstdint>

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

}  // namespace
}  // namespace xferd::transport::verbs
